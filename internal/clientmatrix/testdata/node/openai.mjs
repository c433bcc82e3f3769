// An unmodified app on the official openai package: it calls
// api.openai.com with the key in OPENAI_API_KEY, configured by nothing but
// the environment the SDK reads itself.
//
// usage: node openai.mjs CASE MODEL [CASE MODEL]…, CASE one of answer,
// stream: one call per pair, in turn, each announced by "case MODEL". It prints
// "answer TEXT"; or one "delta JSON-STRING" line per streamed piece, as it
// arrives, then "done"; or, when the SDK throws its typed API error,
// "error CLASS STATUS TYPE MESSAGE" from it; anything else "failed ...".
//
// sdks.mjs imports runCase, to run this app's calls in one node process
// beside the other SDKs' apps.
import OpenAI from 'openai';
import { pathToFileURL } from 'node:url';

// No retries: a retry would hide which answer came first.
const client = new OpenAI({ maxRetries: 0, timeout: 60_000 });
const messages = [{ role: 'user', content: 'Say hello.' }];
const out = (line) => process.stdout.write(line + '\n');

export async function runCase(kase, model) {
  try {
    if (kase === 'stream') {
      const stream = await client.chat.completions.create({ model, messages, stream: true });
      for await (const chunk of stream) {
        const piece = chunk.choices[0]?.delta?.content;
        if (piece) out('delta ' + JSON.stringify(piece));
      }
      out('done');
    } else {
      const answer = await client.chat.completions.create({ model, messages });
      out('answer ' + answer.choices[0].message.content);
    }
  } catch (e) {
    if (e instanceof OpenAI.APIError) {
      out(`error ${e.constructor.name} ${e.status} ${e.error?.type} ${e.error?.message}`);
    } else {
      out(`failed ${e?.constructor?.name}: ${e?.message} ${e?.cause ?? ''}`);
    }
  }
}

// Run as a program, not imported (by sdks.mjs).
if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const args = process.argv.slice(2);
  for (let i = 0; i < args.length; i += 2) {
    out('case ' + args[i + 1]);
    await runCase(args[i], args[i + 1]);
  }
}
