// A Node app for the `detour run` tests that calls OpenAI as the official
// openai package does: global fetch (undici, which before Node 22.21 never
// reads HTTPS_PROXY) to OPENAI_BASE_URL, defaulting to the vendor's own
// https://api.openai.com/v1, with /chat/completions appended.
const base = process.env.OPENAI_BASE_URL ?? 'https://api.openai.com/v1';
const resp = await fetch(`${base}/chat/completions`, {
  method: 'POST',
  headers: {'content-type': 'application/json', authorization: `Bearer ${process.env.OPENAI_API_KEY}`},
  body: JSON.stringify({model: 'gpt-4o', messages: [{role: 'user', content: 'Say hello.'}]}),
});
const body = await resp.json();
if (!resp.ok) {
  console.error('status', resp.status, JSON.stringify(body));
  process.exit(1);
}
console.log(body.choices[0].message.content);
