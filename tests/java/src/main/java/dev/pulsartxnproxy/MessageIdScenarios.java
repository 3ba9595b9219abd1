package dev.pulsartxnproxy;

import static java.nio.charset.StandardCharsets.UTF_8;
import static java.util.concurrent.TimeUnit.MILLISECONDS;
import static java.util.concurrent.TimeUnit.SECONDS;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.ConsumerBuilder;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.MessageId;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.PulsarClientException;
import org.apache.pulsar.client.api.Reader;
import org.apache.pulsar.client.api.ReaderBuilder;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.SubscriptionType;
import org.apache.pulsar.client.impl.MessageIdImpl;

/**
 * {@code message_ids}: message ids through the official Java client on a topic of two batch entries of 5 messages
 * ({@code m<entry>-<index>}) and two single messages ({@code s2}, {@code s3}): cumulative acknowledgements inside a
 * batch (the client acknowledges "the entry before", entry -1, for the first batch), batch-index acknowledgements,
 * seeks to an id inside a batch and to entry -1, and readers started there. Observations are payload lists.
 */
final class MessageIdScenarios {

    /** How long "nothing more arrives" is watched for. */
    private static final long QUIET_MS = 500;

    private final PulsarClient client;
    private final Map<String, Object> obs;

    MessageIdScenarios(PulsarClient client, Map<String, Object> obs) {
        this.client = client;
        this.obs = obs;
    }

    void run(String topic) throws Exception {
        List<MessageId> ids = fill(topic);
        long ledger = ((MessageIdImpl) ids.get(0)).getLedgerId();
        MessageId entryMinusOne = new MessageIdImpl(ledger, -1, -1);
        MessageId insideBatch = ids.get(7);

        for (boolean batchIndexAck : new boolean[] {false, true}) {
            for (int index : new int[] {0, 2, 4}) {
                String sub = "cumulative-" + batchIndexAck + "-" + index;
                Consumer<byte[]> consumer = consumer(topic, sub, batchIndexAck, false);
                List<Message<byte[]>> got = drain(consumer, index + 1);
                consumer.acknowledgeCumulative(got.get(got.size() - 1));
                consumer.close();
                obs.put(sub + " then", resubscribe(topic, sub, batchIndexAck));
            }
            String sub = "individual-" + batchIndexAck;
            Consumer<byte[]> consumer = consumer(topic, sub, batchIndexAck, false);
            List<Message<byte[]>> got = drain(consumer, 12);
            consumer.acknowledge(got.get(1));
            consumer.acknowledge(got.get(3));
            consumer.acknowledge(got.get(10));
            consumer.close();
            obs.put(sub + " then", resubscribe(topic, sub, batchIndexAck));
        }

        for (boolean inclusive : new boolean[] {false, true}) {
            String sub = "seek-" + inclusive;
            Consumer<byte[]> consumer = consumer(topic, sub, true, inclusive);
            drain(consumer, 12);
            consumer.seek(entryMinusOne);
            obs.put(sub + " entry -1", texts(drain(consumer, Integer.MAX_VALUE)));
            consumer.seek(insideBatch);
            obs.put(sub + " inside batch", texts(drain(consumer, Integer.MAX_VALUE)));
            consumer.close();
            obs.put(sub + " inside batch then", resubscribe(topic, sub, true));
        }

        for (boolean inclusive : new boolean[] {false, true}) {
            for (Map.Entry<String, MessageId> start : Map.of(
                    "entry -1", entryMinusOne, "inside batch", insideBatch, "earliest", MessageId.earliest).entrySet()) {
                ReaderBuilder<byte[]> builder = client.newReader().topic(topic).startMessageId(start.getValue());
                Reader<byte[]> reader = (inclusive ? builder.startMessageIdInclusive() : builder).create();
                obs.put("reader " + start.getKey() + " inclusive=" + inclusive, texts(read(reader)));
                reader.close();
            }
        }
    }

    private List<MessageId> fill(String topic) throws Exception {
        List<MessageId> ids = new ArrayList<>();
        try (Producer<byte[]> batched = client.newProducer()
                .topic(topic)
                .enableBatching(true)
                .batchingMaxMessages(5)
                .batchingMaxPublishDelay(1, SECONDS)
                .create()) {
            for (int entry = 0; entry < 2; entry++) {
                List<java.util.concurrent.CompletableFuture<MessageId>> sends = new ArrayList<>();
                for (int index = 0; index < 5; index++) {
                    sends.add(batched.sendAsync(("m" + entry + "-" + index).getBytes(UTF_8)));
                }
                batched.flush();
                for (var send : sends) {
                    ids.add(send.get(15, SECONDS));
                }
            }
        }
        try (Producer<byte[]> single = client.newProducer().topic(topic).enableBatching(false).create()) {
            ids.add(single.send("s2".getBytes(UTF_8)));
            ids.add(single.send("s3".getBytes(UTF_8)));
        }
        return ids;
    }

    private Consumer<byte[]> consumer(String topic, String sub, boolean batchIndexAck, boolean inclusive)
            throws PulsarClientException {
        ConsumerBuilder<byte[]> builder = client.newConsumer()
                .topic(topic)
                .subscriptionName(sub)
                .subscriptionType(SubscriptionType.Exclusive)
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
                .enableBatchIndexAcknowledgment(batchIndexAck)
                .acknowledgmentGroupTime(0, MILLISECONDS)
                .isAckReceiptEnabled(true);
        if (inclusive) {
            builder = builder.startMessageIdInclusive();
        }
        return builder.subscribe();
    }

    private List<String> resubscribe(String topic, String sub, boolean batchIndexAck) throws PulsarClientException {
        Consumer<byte[]> consumer = consumer(topic, sub, batchIndexAck, false);
        List<String> got = texts(drain(consumer, Integer.MAX_VALUE));
        consumer.close();
        return got;
    }

    private static List<Message<byte[]>> drain(Consumer<byte[]> consumer, int limit) throws PulsarClientException {
        List<Message<byte[]>> received = new ArrayList<>();
        while (received.size() < limit) {
            Message<byte[]> msg = consumer.receive((int) QUIET_MS, MILLISECONDS);
            if (msg == null) {
                break;
            }
            received.add(msg);
        }
        return received;
    }

    private static List<Message<byte[]>> read(Reader<byte[]> reader) throws PulsarClientException {
        List<Message<byte[]>> received = new ArrayList<>();
        while (true) {
            Message<byte[]> msg = reader.readNext((int) QUIET_MS, MILLISECONDS);
            if (msg == null) {
                return received;
            }
            received.add(msg);
        }
    }

    private static List<String> texts(List<Message<byte[]>> messages) {
        List<String> out = new ArrayList<>();
        for (Message<byte[]> msg : messages) {
            out.add(new String(msg.getValue(), UTF_8));
        }
        return out;
    }
}
