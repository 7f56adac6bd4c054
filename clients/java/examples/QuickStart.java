import io.leafid.client.IdSupply;
import io.leafid.client.LeafidClient;
import io.leafid.client.RejectedException;
import io.leafid.client.UnavailableException;
import java.time.Duration;
import java.util.Arrays;

/**
 * A runnable example: ids of one tag and snowflake ids from one or more leafid servers.
 *
 * <pre>
 * java -cp target/classes examples/QuickStart.java http://127.0.0.1:8080 [more servers...]
 * </pre>
 */
public final class QuickStart {
    public static void main(String[] args) {
        String[] servers = args.length > 0 ? args : new String[] {"http://127.0.0.1:8080"};
        try (LeafidClient client = LeafidClient.builder()
                .servers(servers)
                .batchSize(1000)
                .waitTimeout(Duration.ofSeconds(3))
                .build()) {
            IdSupply orders = client.segment("leaf-segment-test");
            for (int k = 0; k < 5; k++) {
                System.out.println("segment id:   " + orders.nextId());
            }
            System.out.println("snowflake id: " + client.nextSnowflakeId());
            System.out.println("async id:     " + orders.nextIdAsync().join());
            try {
                client.nextId("no-such-tag");
            } catch (RejectedException e) {
                System.out.println("refused: " + e.code() + " (" + e.serverMessage() + ")");
            }
            System.out.println("stats: " + client.stats() + ", down: " + client.downServers());
        } catch (UnavailableException e) {
            System.err.println("no server of " + Arrays.toString(servers) + " answered: " + e.getMessage());
            System.exit(1);
        }
    }
}
