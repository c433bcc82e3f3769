"""An unmodified app on requests (Debian's python3-requests): it calls the
OpenAI Chat Completions API at api.openai.com with the key in
OPENAI_API_KEY. It knows nothing of detour: requests reads HTTPS_PROXY and
REQUESTS_CA_BUNDLE itself.

usage: requests_client.py CASE MODEL [CASE MODEL]…, CASE one of answer,
stream. Output as
urllib_client.py's: "answer TEXT"; "delta JSON-STRING" lines as they arrive,
then "done"; "error STATUS TYPE MESSAGE" for an HTTP error.
"""
import json
import os
import sys

import requests


def run_case(case, model):
    body = {"model": model, "messages": [{"role": "user", "content": "Say hello."}]}
    if case == "stream":
        body["stream"] = True
    resp = requests.post(
        "https://api.openai.com/v1/chat/completions",
        json=body,
        headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]},
        stream=case == "stream",
        timeout=60,
    )
    if resp.status_code >= 400:
        err = resp.json().get("error", {})
        print("error %d %s %s" % (resp.status_code, err.get("type"), err.get("message")), flush=True)
        return 1
    if case != "stream":
        print("answer " + resp.json()["choices"][0]["message"]["content"], flush=True)
        return 0
    for line in resp.iter_lines(decode_unicode=True):
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        chunk = json.loads(line[len("data: "):])
        for choice in chunk.get("choices", []):
            piece = (choice.get("delta") or {}).get("content")
            if piece:
                print("delta " + json.dumps(piece), flush=True)
    print("done", flush=True)
    return 0


def main():
    args = sys.argv[1:]
    for i in range(0, len(args), 2):
        print("case " + args[i + 1], flush=True)
        run_case(args[i], args[i + 1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
