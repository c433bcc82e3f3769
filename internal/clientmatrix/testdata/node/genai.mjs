// An unmodified app on the official @google/genai package: it calls the
// Gemini API at generativelanguage.googleapis.com with the key in
// GEMINI_API_KEY, configured by nothing but the environment the SDK reads
// itself.
//
// usage: node genai.mjs CASE MODEL, CASE one of answer, stream. Output as
// openai.mjs's: "answer TEXT"; "delta JSON-STRING" lines as they arrive,
// then "done"; "error CLASS STATUS TYPE MESSAGE" from the SDK's typed
// error (TYPE is Google's status, e.g. INVALID_ARGUMENT); anything else
// "failed ...".
import { ApiError, GoogleGenAI } from '@google/genai';

const [kase, model] = process.argv.slice(2);
const ai = new GoogleGenAI({ apiKey: process.env.GEMINI_API_KEY });
const contents = 'Say hello.';
const out = (line) => process.stdout.write(line + '\n');

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
  process.exitCode = 1;
}
