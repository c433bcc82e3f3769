"""An unmodified app on Python's standard library: urllib calls the OpenAI
Chat Completions API at api.openai.com with the key in OPENAI_API_KEY. It
knows nothing of detour: urllib's own defaults pick up HTTPS_PROXY and
OpenSSL's SSL_CERT_FILE.

usage: urllib_client.py CASE MODEL [CASE MODEL]…, CASE one of answer,
stream: one call per pair, in turn, each announced by "case MODEL". It prints
"answer TEXT", or one "delta JSON-STRING" line per streamed piece as it
arrives and then "done", or for an HTTP error "error STATUS TYPE MESSAGE"
from the vendor's error body.
"""
import json
import os
import ssl
import sys
import urllib.error
import urllib.request


# The default context urlopen would make for each connection, made once:
# loading the bundle SSL_CERT_FILE names is most of a call's CPU.
CONTEXT = ssl.create_default_context()


def run_case(case, model):
    body = {"model": model, "messages": [{"role": "user", "content": "Say hello."}]}
    if case == "stream":
        body["stream"] = True
    req = urllib.request.Request(
        "https://api.openai.com/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={
            "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
            "Content-Type": "application/json",
        },
    )
    try:
        with urllib.request.urlopen(req, timeout=60, context=CONTEXT) as resp:
            if case != "stream":
                answer = json.load(resp)
                print("answer " + answer["choices"][0]["message"]["content"], flush=True)
                return 0
            for raw in resp:
                line = raw.decode().strip()
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[len("data: "):])
                for choice in chunk.get("choices", []):
                    piece = (choice.get("delta") or {}).get("content")
                    if piece:
                        print("delta " + json.dumps(piece), flush=True)
            print("done", flush=True)
            return 0
    except urllib.error.HTTPError as e:
        err = json.load(e).get("error", {})
        print("error %d %s %s" % (e.code, err.get("type"), err.get("message")), flush=True)
        return 1


def main():
    args = sys.argv[1:]
    for i in range(0, len(args), 2):
        print("case " + args[i + 1], flush=True)
        run_case(args[i], args[i + 1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
