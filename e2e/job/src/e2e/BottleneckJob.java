package e2e;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.source.SourceSplit;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiter;
import org.apache.flink.api.connector.source.util.ratelimit.RateLimiterStrategy;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.connector.datagen.source.GeneratorFunction;
import org.apache.flink.core.execution.CheckpointingMode;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.util.Collector;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

/**
 * The e2e test job of flink-autoscaler-rs: a rate-limited source feeding a deliberately slow keyed
 * vertex, so that at parallelism 1 the slow vertex is saturated (busy ~1000 ms/s) and backpressures
 * the source, and raising its parallelism relieves it.
 *
 * <pre>
 * "Source: rate-source" --HASH(key = value % keys)--> "bottleneck" --REBALANCE--> "discard-sink: Writer"
 * </pre>
 *
 * Arguments (all optional): --rate N (records/s over all source subtasks, default 2000),
 * --rate-file PATH (re-read every second, overrides --rate, 0 pauses the source),
 * --work-us N (cost per record in the bottleneck, default 1000), --work-mode sleep|spin (default
 * sleep: the task is busy but the CPU is free, so p>2 still helps on a 2-core machine),
 * --keys N (default 128), --max-parallelism N (default 16), --parallelism N (initial parallelism
 * of the bottleneck, default 1), --checkpoint-interval-ms N (default 5000, 0 = off).
 *
 * Every operator has a fixed uid, so the job vertex ids are the same on every submission.
 */
public final class BottleneckJob {

    private BottleneckJob() {}

    public static void main(String[] args) throws Exception {
        Map<String, String> params = parse(args);
        double rate = Double.parseDouble(params.getOrDefault("rate", "2000"));
        String rateFile = params.getOrDefault("rate-file", "");
        long workUs = Long.parseLong(params.getOrDefault("work-us", "1000"));
        boolean spin = "spin".equals(params.getOrDefault("work-mode", "sleep"));
        long keys = Long.parseLong(params.getOrDefault("keys", "128"));
        int maxParallelism = Integer.parseInt(params.getOrDefault("max-parallelism", "16"));
        int parallelism = Integer.parseInt(params.getOrDefault("parallelism", "1"));
        long checkpointMs = Long.parseLong(params.getOrDefault("checkpoint-interval-ms", "5000"));

        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setMaxParallelism(maxParallelism);
        env.setParallelism(1);
        if (checkpointMs > 0) {
            env.enableCheckpointing(checkpointMs, CheckpointingMode.EXACTLY_ONCE);
        }

        DataGeneratorSource<Long> source =
                new DataGeneratorSource<>(
                        (GeneratorFunction<Long, Long>) value -> value,
                        Long.MAX_VALUE,
                        new FileRateLimiterStrategy(rate, rateFile),
                        Types.LONG);

        env.fromSource(source, WatermarkStrategy.noWatermarks(), "rate-source")
                .uid("rate-source")
                .setParallelism(1)
                .keyBy(value -> value % keys, Types.LONG)
                .process(new Bottleneck(workUs, spin))
                .uid("bottleneck")
                .name("bottleneck")
                .setParallelism(parallelism)
                .rebalance()
                .sinkTo(new DiscardingSink<>())
                .uid("discard-sink")
                .name("discard-sink")
                .setParallelism(1);

        env.execute("autoscaler-e2e-bottleneck");
    }

    private static Map<String, String> parse(String[] args) {
        Map<String, String> out = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            if (!args[i].startsWith("--")) {
                throw new IllegalArgumentException("expected --key value, got " + args[i]);
            }
            out.put(args[i].substring(2), args[i + 1]);
        }
        if (args.length % 2 != 0) {
            throw new IllegalArgumentException("dangling argument " + args[args.length - 1]);
        }
        return out;
    }

    /** Costs {@code workUs} per record; counts records per key in keyed state (moved on rescale). */
    static final class Bottleneck extends KeyedProcessFunction<Long, Long, Long> {
        private final long workNanos;
        private final boolean spin;
        private transient ValueState<Long> count;
        /** Work owed but not yet slept (sleep mode parks in >= 1 ms slices to stay accurate). */
        private transient long debtNanos;

        Bottleneck(long workUs, boolean spin) {
            this.workNanos = workUs * 1000L;
            this.spin = spin;
        }

        @Override
        public void open(OpenContext ctx) {
            count = getRuntimeContext().getState(new ValueStateDescriptor<>("count", Types.LONG));
        }

        @Override
        public void processElement(Long value, Context ctx, Collector<Long> out) throws Exception {
            if (spin) {
                long until = System.nanoTime() + workNanos;
                while (System.nanoTime() < until) {
                    Thread.onSpinWait();
                }
            } else {
                debtNanos += workNanos;
                if (debtNanos >= 1_000_000L) {
                    long start = System.nanoTime();
                    LockSupport.parkNanos(debtNanos);
                    // Oversleeping is paid back by the next records.
                    debtNanos -= System.nanoTime() - start;
                }
            }
            Long c = count.value();
            count.update(c == null ? 1L : c + 1L);
            out.collect(value);
        }
    }

    /** Total rate split over the source subtasks; re-reads an optional rate file every second. */
    static final class FileRateLimiterStrategy implements RateLimiterStrategy<SourceSplit> {
        private static final long serialVersionUID = 1L;
        private final double rate;
        private final String rateFile;

        FileRateLimiterStrategy(double rate, String rateFile) {
            this.rate = rate;
            this.rateFile = rateFile;
        }

        @Override
        public RateLimiter<SourceSplit> createRateLimiter(int parallelism) {
            return new FileRateLimiter(rate, rateFile, Math.max(1, parallelism));
        }
    }

    static final class FileRateLimiter implements RateLimiter<SourceSplit> {
        /** A permit due within this lead is granted at once (one timer per ms, not per record). */
        private static final long LEAD_NANOS = 1_000_000L;
        /** After a pause, do not burst more than this much "saved up" time. */
        private static final long MAX_CREDIT_NANOS = 100_000_000L;

        private final String rateFile;
        private final int parallelism;
        private final ScheduledExecutorService timer;
        private double totalRate;
        private long nextFreeNanos = System.nanoTime();
        /** Set in the past so the first acquire reads the file (and no subtraction can overflow). */
        private long lastReadNanos = System.nanoTime() - 2_000_000_000L;

        FileRateLimiter(double rate, String rateFile, int parallelism) {
            this.totalRate = rate;
            this.rateFile = rateFile;
            this.parallelism = parallelism;
            this.timer =
                    Executors.newSingleThreadScheduledExecutor(
                            r -> {
                                Thread t = new Thread(r, "e2e-rate-limiter");
                                t.setDaemon(true);
                                return t;
                            });
        }

        private void refreshRate(long now) {
            if (rateFile.isEmpty() || now - lastReadNanos < 1_000_000_000L) {
                return;
            }
            lastReadNanos = now;
            try {
                String text = new String(Files.readAllBytes(Path.of(rateFile)), StandardCharsets.UTF_8).trim();
                if (!text.isEmpty()) {
                    totalRate = Double.parseDouble(text);
                }
            } catch (Exception e) {
                // Keep the previous rate when the file is missing or half-written.
            }
        }

        @Override
        public synchronized CompletionStage<Void> acquire(int permits) {
            long now = System.nanoTime();
            refreshRate(now);
            CompletableFuture<Void> granted = new CompletableFuture<>();
            double perSubtask = totalRate / parallelism;
            if (perSubtask <= 0) {
                // Paused: look again later; the source counts as idle meanwhile.
                timer.schedule(() -> forward(acquire(permits), granted), 200, TimeUnit.MILLISECONDS);
                return granted;
            }
            long start = Math.max(nextFreeNanos, now - MAX_CREDIT_NANOS);
            nextFreeNanos = start + (long) (permits * 1e9 / perSubtask);
            long delay = start - now;
            if (delay <= LEAD_NANOS) {
                granted.complete(null);
            } else {
                timer.schedule(() -> granted.complete(null), delay, TimeUnit.NANOSECONDS);
            }
            return granted;
        }

        private static void forward(CompletionStage<Void> from, CompletableFuture<Void> to) {
            from.whenComplete((v, e) -> to.complete(null));
        }
    }
}
