"""An unmodified app on httpx (Debian's python3-httpx): it calls the OpenAI
Chat Completions API at api.openai.com with the key in OPENAI_API_KEY. It
knows nothing of detour: httpx reads HTTPS_PROXY and SSL_CERT_FILE itself
(trust_env, its default).

usage: httpx_client.py CASE MODEL [CASE MODEL]…, CASE one of answer,
stream. Output as
urllib_client.py's: "answer TEXT"; "delta JSON-STRING" lines as they arrive,
then "done"; "error STATUS TYPE MESSAGE" for an HTTP error.
"""
import json
import os
import sys

import httpx


def run_case(case, model):
    body = {"model": model, "messages": [{"role": "user", "content": "Say hello."}]}
    headers = {"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]}
    url = "https://api.openai.com/v1/chat/completions"
    with httpx.Client(timeout=60) as client:
        if case != "stream":
            resp = client.post(url, json=body, headers=headers)
            if resp.status_code >= 400:
                err = resp.json().get("error", {})
                print("error %d %s %s" % (resp.status_code, err.get("type"), err.get("message")), flush=True)
                return 1
            print("answer " + resp.json()["choices"][0]["message"]["content"], flush=True)
            return 0
        body["stream"] = True
        with client.stream("POST", url, json=body, headers=headers) as resp:
            if resp.status_code >= 400:
                err = json.loads(resp.read()).get("error", {})
                print("error %d %s %s" % (resp.status_code, err.get("type"), err.get("message")), flush=True)
                return 1
            for line in resp.iter_lines():
                # httpx before 0.24 keeps the line break on each line.
                line = line.rstrip("\r\n")
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
