// An unmodified app on Java's own HTTP client (java.net.http.HttpClient,
// Java 11+): it calls the OpenAI Chat Completions API at api.openai.com
// with the key in OPENAI_API_KEY. It knows nothing of detour: the client
// uses the JVM's default proxy selector (the https.proxyHost / https.proxyPort
// system properties) and the JVM's trust store (javax.net.ssl.trustStore),
// which is all that JAVA_TOOL_OPTIONS can give it from outside.
//
// usage: java Client CASE MODEL [CASE MODEL]…, CASE one of answer, stream:
// one call per pair, in turn, each announced by "case MODEL". It prints
// "answer TEXT"; or one "delta JSON-STRING" line per streamed piece as it
// arrives, then "done"; or "error STATUS TYPE MESSAGE" from the vendor's
// error body. The JDK has no JSON parser: a regular expression reads the
// few string fields it needs, and keeps their JSON escapes.
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Iterator;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

public class Client {
    private static String field(String json, String name) {
        Matcher m = Pattern.compile("\"" + name + "\":\"((?:[^\"\\\\]|\\\\.)*)\"").matcher(json);
        return m.find() ? m.group(1) : null;
    }

    private static void out(String line) {
        System.out.println(line);
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        HttpClient client = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(30)).build();
        for (int i = 0; i + 1 < args.length; i += 2) {
            out("case " + args[i + 1]);
            runCase(client, args[i], args[i + 1]);
        }
    }

    private static void runCase(HttpClient client, String kase, String model) throws Exception {
        boolean stream = kase.equals("stream");
        String body = "{\"model\":\"" + model + "\",\"messages\":[{\"role\":\"user\",\"content\":\"Say hello.\"}]"
                + (stream ? ",\"stream\":true}" : "}");
        HttpRequest req = HttpRequest.newBuilder(URI.create("https://api.openai.com/v1/chat/completions"))
                .timeout(Duration.ofSeconds(60))
                .header("Authorization", "Bearer " + System.getenv("OPENAI_API_KEY"))
                .header("Content-Type", "application/json")
                .POST(HttpRequest.BodyPublishers.ofString(body))
                .build();
        if (!stream) {
            HttpResponse<String> resp = client.send(req, HttpResponse.BodyHandlers.ofString());
            if (resp.statusCode() >= 400) {
                out("error " + resp.statusCode() + " " + field(resp.body(), "type") + " " + field(resp.body(), "message"));
                return;
            }
            out("answer " + field(resp.body(), "content"));
            return;
        }
        // ofLines hands each line over as it arrives.
        HttpResponse<Stream<String>> resp = client.send(req, HttpResponse.BodyHandlers.ofLines());
        if (resp.statusCode() >= 400) {
            String all = String.join("\n", (Iterable<String>) resp.body()::iterator);
            out("error " + resp.statusCode() + " " + field(all, "type") + " " + field(all, "message"));
            return;
        }
        for (Iterator<String> it = resp.body().iterator(); it.hasNext();) {
            String line = it.next();
            if (!line.startsWith("data: ") || line.equals("data: [DONE]")) {
                continue;
            }
            String piece = field(line, "content");
            if (piece != null && !piece.isEmpty()) {
                out("delta \"" + piece + "\"");
            }
        }
        out("done");
    }
}
