// An unmodified app on the official @anthropic-ai/sdk package: it calls
// api.anthropic.com with the key in ANTHROPIC_API_KEY, configured by
// nothing but the environment the SDK reads itself.
//
// usage: node anthropic.mjs CASE MODEL [CASE MODEL]…, CASE one of answer,
// stream: one call per pair, in turn, each announced by "case MODEL". Output
// as openai.mjs's: "answer TEXT"; "delta JSON-STRING" lines as they arrive,
// then "done"; "error CLASS STATUS TYPE MESSAGE" from the SDK's typed
// error; anything else "failed ...".
//
// sdks.mjs imports runCase, to run this app's calls in one node process
// beside the other SDKs' apps.
import Anthropic from '@anthropic-ai/sdk';
import { pathToFileURL } from 'node:url';

const client = new Anthropic({ maxRetries: 0, timeout: 60_000 });
const out = (line) => process.stdout.write(line + '\n');

export async function runCase(kase, model) {
  const request = { model, max_tokens: 64, messages: [{ role: 'user', content: 'Say hello.' }] };
  try {
    if (kase === 'stream') {
      const stream = await client.messages.create({ ...request, stream: true });
      for await (const event of stream) {
        if (event.type === 'content_block_delta' && event.delta.type === 'text_delta') {
          out('delta ' + JSON.stringify(event.delta.text));
        }
      }
      out('done');
    } else {
      const answer = await client.messages.create(request);
      out('answer ' + answer.content.map((b) => b.text ?? '').join(''));
    }
  } catch (e) {
    if (e instanceof Anthropic.APIError) {
      // The error body is Anthropic's envelope: {type: "error", error: {type, message}}.
      out(`error ${e.constructor.name} ${e.status} ${e.error?.error?.type} ${e.error?.error?.message}`);
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
