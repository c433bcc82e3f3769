// An unmodified Java 17 app for the `detour run` tests: it calls OpenAI
// with java.net.http.HttpClient and configures nothing, neither a proxy nor
// a trust store. detour run reaches it through JAVA_TOOL_OPTIONS alone.
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;

public class App {
    public static void main(String[] args) throws Exception {
        HttpClient client = HttpClient.newHttpClient();
        HttpRequest req = HttpRequest.newBuilder(URI.create("https://api.openai.com/v1/chat/completions"))
            .header("Content-Type", "application/json")
            .header("Authorization", "Bearer sk-test-not-a-real-key")
            .POST(HttpRequest.BodyPublishers.ofString(
                "{\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"user\",\"content\":\"Say hello.\"}]}"))
            .build();
        HttpResponse<String> resp = client.send(req, HttpResponse.BodyHandlers.ofString());
        System.out.println("status " + resp.statusCode());
        System.out.println(resp.body());
        // A property of the user's own JAVA_TOOL_OPTIONS, which detour keeps.
        System.out.println("user.prop=" + System.getProperty("user.prop"));
    }
}
