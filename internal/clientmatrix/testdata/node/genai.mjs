// An unmodified app on the official @google/genai package: it calls the
// Gemini API at generativelanguage.googleapis.com with the key in
// GEMINI_API_KEY, configured by nothing but the environment the SDK reads
// itself.
//
// usage: node genai.mjs CASE MODEL [CASE MODEL]…, CASE one of answer,
// stream: one call per pair, in turn, each announced by "case MODEL". Output as
// openai.mjs's: "answer TEXT"; "delta JSON-STRING" lines as they arrive,
// then "done"; "error CLASS STATUS TYPE MESSAGE" from the SDK's typed
// error (TYPE is Google's status, e.g. INVALID_ARGUMENT); anything else
// "failed ...".
//
// sdks.mjs imports runCase, to run this app's calls in one node process
// beside the other SDKs' apps.
import { ApiError, GoogleGenAI } from '@google/genai';
import { pathToFileURL } from 'node:url';

const ai = new GoogleGenAI({ apiKey: process.env.GEMINI_API_KEY });
const contents = 'Say hello.';
const out = (line) => process.stdout.write(line + '\n');

export async function runCase(kase, model) {
  try {
    if (kase === 'stream') {
      const stream = await ai.models.generateContentStream({ model, contents });
      for await (const chunk of stream) {
        if (chunk.text) out('delta ' + JSON.stringify(chunk.text));
      }
      out('done');
    } else {
      const answer = await ai.models.generateContent({ model, contents });
      out('answer ' + answer.text);
    }
  } catch (e) {
    if (e instanceof ApiError) {
      // The SDK puts the vendor's error body, as JSON, in the message.
      let status = '', message = e.message;
      try {
        const body = JSON.parse(e.message.slice(e.message.indexOf('{')));
        ({ status, message } = body.error ?? body);
      } catch {}
      out(`error ${e.constructor.name} ${e.status} ${status} ${message}`);
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
