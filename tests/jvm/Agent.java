// A JVM agent with no proxy code: java.net.http.HttpClient and HttpURLConnection, both on
// the default ProxySelector and SSLContext, which read the properties that
// `freezeframe exec` puts in JAVA_TOOL_OPTIONS. Run as `java Agent.java BASE_URL`.
import java.io.InputStream;
import java.net.URI;
import java.net.URL;
import java.net.HttpURLConnection;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;

public class Agent {
    public static void main(String[] args) throws Exception {
        String base = args[0];
        HttpClient client = HttpClient.newHttpClient();
        HttpRequest request = HttpRequest.newBuilder(URI.create(base + "/tool/counter?via=httpclient")).build();
        System.out.println(client.send(request, HttpResponse.BodyHandlers.ofString()).body());
        HttpURLConnection connection =
            (HttpURLConnection) new URL(base + "/tool/counter?via=urlconnection").openConnection();
        try (InputStream body = connection.getInputStream()) {
            System.out.println(new String(body.readAllBytes(), StandardCharsets.UTF_8));
        }
    }
}
