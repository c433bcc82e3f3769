// The three SDK apps (openai.mjs, anthropic.mjs, genai.mjs) in one node
// process: each call is made by its own app's runCase, as that app run
// alone would make it, and node's start and the code the SDKs share are
// paid once instead of once per app. Each app reads its own SDK's
// environment (OPENAI_*, ANTHROPIC_*, GEMINI_* / GOOGLE_GEMINI_BASE_URL),
// which no other app reads.
//
// usage: node sdks.mjs APP CASE MODEL [APP CASE MODEL]…, APP one of openai,
// anthropic, genai: one call per triple, in turn, each announced by "case
// MODEL"; the output of each call is its app's.
const args = process.argv.slice(2);
const apps = {};
for (let i = 0; i < args.length; i += 3) {
  apps[args[i]] ??= (await import(`./${args[i]}.mjs`)).runCase;
}
for (let i = 0; i < args.length; i += 3) {
  process.stdout.write('case ' + args[i + 2] + '\n');
  await apps[args[i]](args[i + 1], args[i + 2]);
}
