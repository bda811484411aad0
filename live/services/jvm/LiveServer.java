// The live harness's JVM HTTP service (HotSpot, tiered JIT): a handler mix
// whose code runs interpreted first and is compiled by C1 and then C2 as it
// gets hot, so its latency warms up.
//
//   java LiveServer.java is not how it runs: `javac -d OUT LiveServer.java`,
//   then `java -cp OUT LiveServer --mix sha|mixed|maps|alloc [--port N]`
//
// Mixes:
//   sha    SHA-256 over an 8 KiB body, chained 8 times (MessageDigest)
//   mixed  parse a query, fill and sort a list of records through streams,
//          format them with String.format and a regular expression, and
//          build a JSON answer with a StringBuilder: many methods, many
//          call sites, a longer climb through the tiers
//   maps   sum 200 decimal amounts (BigDecimal) by key in a TreeMap, join a
//          range of it with a StringJoiner and split it again: boxed
//          arithmetic, comparisons and string building
//   alloc  parse 300 generated log lines (split, parseInt) into short-lived
//          records, group them by user in a HashMap of ArrayLists, sum and
//          rank the users through a stream: an allocation-heavy handler
//          whose young collections and C2's escape analysis (allocations
//          removed from compiled code) shape its warm-up (written
//          2026-11-29, after the service method's last change: held out)
//
// Listens on 127.0.0.1 (port 0 picks a free one) and prints
// "listening on 127.0.0.1:PORT" once it accepts connections. GET /health
// answers without work.
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.math.BigDecimal;
import java.math.RoundingMode;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.StringJoiner;
import java.util.TreeMap;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;

public final class LiveServer {
    private static final byte[] BODY = new byte[8192];
    private static final Pattern NAME = Pattern.compile("^([a-z]+)-(\\d{1,4})$");
    private static final String[] WORDS = {"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"};
    private static final AtomicLong COUNT = new AtomicLong();

    record Item(int id, String name, double score, int group) {}

    static String sha(long n) throws NoSuchAlgorithmException {
        MessageDigest md = MessageDigest.getInstance("SHA-256");
        byte[] d = BODY;
        for (int i = 0; i < 8; i++) {
            md.update(d);
            md.update((byte) (n + i));
            byte[] h = md.digest();
            d = i == 7 ? h : BODY;
            if (i == 7) {
                StringBuilder sb = new StringBuilder("{\"sha\":\"");
                for (int k = 0; k < 8; k++) sb.append(String.format("%02x", h[k]));
                return sb.append("\"}").toString();
            }
        }
        return "{}";
    }

    static String mixed(long n, String query) {
        Map<String, String> params = new HashMap<>();
        if (query != null) {
            for (String kv : query.split("&")) {
                int i = kv.indexOf('=');
                if (i > 0) params.put(kv.substring(0, i), kv.substring(i + 1));
            }
        }
        int size = 150;
        long x = n * 2654435761L + 1;
        List<Item> items = new ArrayList<>(size);
        for (int i = 0; i < size; i++) {
            x ^= x << 13; x ^= x >>> 7; x ^= x << 17;
            int v = (int) (x & 0x7fffffff);
            items.add(new Item(i, WORDS[v % WORDS.length] + "-" + (v % 10000), (v % 100003) / 101.0, v % 13));
        }
        Map<Integer, Double> byGroup = items.stream()
                .filter(it -> it.score() > 10)
                .collect(Collectors.groupingBy(Item::group, Collectors.summingDouble(Item::score)));
        List<String> names = items.stream()
                .sorted(Comparator.comparingDouble(Item::score).reversed().thenComparing(Item::name))
                .limit(40)
                .map(it -> String.format("%s:%.2f", it.name(), it.score()))
                .collect(Collectors.toList());
        int matched = 0;
        long digits = 0;
        for (Item it : items) {
            Matcher m = NAME.matcher(it.name());
            if (m.matches()) {
                matched++;
                digits += Long.parseLong(m.group(2));
            }
        }
        StringBuilder sb = new StringBuilder(2048);
        sb.append("{\"n\":").append(n).append(",\"matched\":").append(matched)
                .append(",\"digits\":").append(digits).append(",\"groups\":{");
        boolean first = true;
        for (Map.Entry<Integer, Double> e : byGroup.entrySet()) {
            if (!first) sb.append(',');
            first = false;
            sb.append('"').append(e.getKey()).append("\":").append(String.format("%.1f", e.getValue()));
        }
        sb.append("},\"top\":[");
        for (int i = 0; i < names.size(); i++) {
            if (i > 0) sb.append(',');
            sb.append('"').append(names.get(i)).append('"');
        }
        sb.append("],\"q\":").append(params.size()).append('}');
        return sb.toString();
    }

    static String maps(long n) {
        TreeMap<String, BigDecimal> totals = new TreeMap<>();
        long x = n * 0x9E3779B97F4A7C15L + 7;
        for (int i = 0; i < 200; i++) {
            x ^= x << 13; x ^= x >>> 7; x ^= x << 17;
            String key = WORDS[(int) ((x >>> 33) % WORDS.length)] + "/" + ((x >>> 40) % 50);
            BigDecimal amount = BigDecimal.valueOf((x >>> 20) % 100000, 2);
            totals.merge(key, amount, BigDecimal::add);
        }
        StringJoiner sj = new StringJoiner(",", "{", "}");
        for (Map.Entry<String, BigDecimal> e : totals.headMap("echo").entrySet()) {
            sj.add("\"" + e.getKey() + "\":" + e.getValue().setScale(1, RoundingMode.HALF_UP).toPlainString());
        }
        String joined = sj.toString();
        String[] parts = joined.split(",");
        return "{\"keys\":" + totals.size() + ",\"parts\":" + parts.length + ",\"head\":" + joined + "}";
    }

    record Event(String user, String kind, int amount, long at) {}

    static final String[] KINDS = {"view", "click", "buy", "refund"};

    static String alloc(long n) {
        long x = n * 0x9E3779B97F4A7C15L + 11;
        Map<String, List<Event>> byUser = new HashMap<>();
        for (int i = 0; i < 300; i++) {
            x ^= x << 13; x ^= x >>> 7; x ^= x << 17;
            String line = "u" + ((x >>> 35) % 60) + ";" + KINDS[(int) ((x >>> 20) & 3)] + ";" + ((x >>> 8) % 5000) + ";" + (n * 1000 + i);
            String[] f = line.split(";");
            Event e = new Event(f[0], f[1], Integer.parseInt(f[2]), Long.parseLong(f[3]));
            byUser.computeIfAbsent(e.user(), k -> new ArrayList<>()).add(e);
        }
        List<Map.Entry<String, Integer>> top = byUser.entrySet().stream()
                .map(en -> Map.entry(en.getKey(), en.getValue().stream()
                        .mapToInt(ev -> ev.kind().equals("refund") ? -ev.amount() : ev.amount()).sum()))
                .sorted(Map.Entry.<String, Integer>comparingByValue().reversed().thenComparing(Map.Entry.comparingByKey()))
                .limit(5)
                .collect(Collectors.toList());
        StringBuilder sb = new StringBuilder("{\"users\":").append(byUser.size()).append(",\"top\":[");
        for (int i = 0; i < top.size(); i++) {
            if (i > 0) sb.append(',');
            sb.append("[\"").append(top.get(i).getKey()).append("\",").append(top.get(i).getValue()).append(']');
        }
        return sb.append("]}").toString();
    }

    static void answer(HttpExchange ex, int status, String body, String type) throws IOException {
        byte[] b = (body + "\n").getBytes(StandardCharsets.UTF_8);
        ex.getResponseHeaders().set("Content-Type", type);
        ex.sendResponseHeaders(status, b.length);
        try (OutputStream os = ex.getResponseBody()) {
            os.write(b);
        }
    }

    public static void main(String[] args) throws Exception {
        String mix = "sha";
        int port = 0;
        for (int i = 0; i < args.length; i++) {
            if (args[i].equals("--mix") && i + 1 < args.length) {
                mix = args[++i];
            } else if (args[i].equals("--port") && i + 1 < args.length) {
                port = Integer.parseInt(args[++i]);
            } else {
                System.err.println("LiveServer: unknown argument " + args[i] + " (valid: --mix sha|mixed|maps|alloc, --port N)");
                System.exit(2);
            }
        }
        if (!mix.equals("sha") && !mix.equals("mixed") && !mix.equals("maps") && !mix.equals("alloc")) {
            System.err.println("LiveServer: --mix must be sha, mixed, maps or alloc, got " + mix);
            System.exit(2);
        }
        for (int i = 0; i < BODY.length; i++) BODY[i] = (byte) (i * 31);
        final String theMix = mix;
        HttpServer server;
        try {
            server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), 256);
        } catch (IOException e) {
            System.err.println("LiveServer: listen on 127.0.0.1:" + port + ": " + e.getMessage());
            System.exit(1);
            return;
        }
        server.createContext("/", ex -> {
            try {
                if (!ex.getRequestMethod().equals("GET")) {
                    answer(ex, 405, "GET only", "text/plain");
                    return;
                }
                if (ex.getRequestURI().getPath().equals("/health")) {
                    answer(ex, 200, "ok", "text/plain");
                    return;
                }
                long n = COUNT.incrementAndGet();
                String body = switch (theMix) {
                    case "sha" -> sha(n);
                    case "maps" -> maps(n);
                    case "alloc" -> alloc(n);
                    default -> mixed(n, ex.getRequestURI().getRawQuery());
                };
                answer(ex, 200, body, "application/json");
            } catch (Exception e) {
                answer(ex, 500, "error: " + e, "text/plain");
            } finally {
                ex.close();
            }
        });
        server.setExecutor(Executors.newFixedThreadPool(8));
        server.start();
        System.out.println("listening on 127.0.0.1:" + server.getAddress().getPort());
        System.out.flush();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> server.stop(0)));
    }
}
