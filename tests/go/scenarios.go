package main

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	pulsaradmin "github.com/apache/pulsar-client-go/pulsaradmin"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/admin/config"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
)

// A scenario records what the client observed into r.obs and never asserts. Client calls that fail as part of the
// scenario's subject (ack, seek, commit, abort) are recorded; failures of the setup (subscribe, create a producer,
// open a transaction, send) are returned and become the harness error.
type scenario func(r *run, args []string) error

var scenarios = map[string]scenario{
	"produce_consume":          produceConsume,
	"cumulative_ack":           cumulativeAck,
	"batch_index_acks":         batchIndexAcks,
	"txn_produce":              txnProduce,
	"batch_after_txn":          batchAfterTxn,
	"txn_ack_abort":            txnAckAbort,
	"txn_batch_ack":            txnBatchAck,
	"failover_txn_acks":        failoverTxnAcks,
	"seek":                     seek,
	"reader_start":             readerStart,
	"txn_chunk_ack":            txnChunkAck,
	"key_shared_spread":        keySharedSpread,
	"admin_create_partitioned": adminCreatePartitioned,
}

// batchSize is how many messages the batched scenarios send as one batch.
const batchSize = 10

var exclusive = consumerSpec{subscription: "sub", kind: pulsar.Exclusive}

// produceConsume <topic> [batched]: 10 messages to an Exclusive consumer, each acknowledged; after resubscribing
// nothing comes back.
func produceConsume(r *run, args []string) error {
	topic, batched := arg(args, 0), flag(args, 1, "batched")
	consumer, err := r.consumer(topic, exclusive)
	if err != nil {
		return err
	}
	producer, err := r.producer(topic, batched)
	if err != nil {
		return err
	}
	ids, err := sendAll(producer, nil, payloads("m", 10)...)
	if err != nil {
		return err
	}
	r.obs.put("send_ids", positions(ids))
	got := receive(consumer, 10, settle)
	r.obs.put("received", deliveries(got))
	r.obs.put("extra", deliveries(within(consumer, extra)))
	errs := make([]error, len(got))
	for i, m := range got {
		errs[i] = consumer.Ack(m)
	}
	r.obs.put("ack_errors", outcomes(errs))
	consumer.Close()
	again, err := r.consumer(topic, exclusive)
	if err != nil {
		return err
	}
	r.obs.put("after_resubscribe", deliveries(within(again, quiet)))
	return nil
}

// cumulativeAck <topic> <index> [batch_index_ack] (issue 19, defect 1): one batch of 10; the Exclusive consumer
// acknowledges cumulatively the message at index, closes and subscribes again: what comes back.
func cumulativeAck(r *run, args []string) error {
	topic := arg(args, 0)
	index, err := strconv.Atoi(arg(args, 1))
	if err != nil {
		return err
	}
	spec := exclusive
	spec.batchIndexAck = flag(args, 2, "batch_index_ack")
	r.obs.put("batch_index_ack", spec.batchIndexAck)
	got, err := sendBatchAndReceive(r, topic, spec)
	if err != nil {
		return err
	}
	consumer := got.consumer
	if index < len(got.messages) {
		r.obs.put("acked", string(got.messages[index].Payload()))
		r.obs.put("ack_error", outcome(consumer.AckCumulative(got.messages[index])))
	}
	consumer.Close()
	return resubscribe(r, topic, spec, "after_resubscribe")
}

// batchIndexAcks <topic>: one batch of 10 to an Exclusive consumer with batch-index acknowledgement; m-0, m-2 and
// m-5 are acknowledged one by one; after resubscribing the other 7 come back.
func batchIndexAcks(r *run, args []string) error {
	topic := arg(args, 0)
	spec := exclusive
	spec.batchIndexAck = true
	got, err := sendBatchAndReceive(r, topic, spec)
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range got.messages {
		switch string(m.Payload()) {
		case "m-0", "m-2", "m-5":
			errs = append(errs, got.consumer.Ack(m))
		}
	}
	r.obs.put("ack_errors", outcomes(errs))
	got.consumer.Close()
	return resubscribe(r, topic, spec, "after_resubscribe")
}

// txnProduce <topic> commit|abort [batched]: a transaction sends t-0..t-4; a read-committed consumer sees nothing
// before the end, all five after a commit, none after an abort; then plain messages (from a new producer: see
// batchAfterTxn) flow.
func txnProduce(r *run, args []string) error {
	topic, commit, batched := arg(args, 0), flag(args, 1, "commit"), flag(args, 2, "batched")
	consumer, err := r.consumer(topic, exclusive)
	if err != nil {
		return err
	}
	producer, err := r.producer(topic, batched)
	if err != nil {
		return err
	}
	txn, err := r.newTxn()
	if err != nil {
		return err
	}
	r.obs.put("txn_id", txnID(txn))
	ids, err := sendAll(producer, txn, payloads("t", 5)...)
	if err != nil {
		return err
	}
	r.obs.put("send_ids", positions(ids))
	r.obs.put("before_end", deliveries(within(consumer, quiet)))
	r.obs.put("end_error", outcome(end(txn, commit)))
	r.obs.put("txn_state", txn.GetState().String())
	if commit {
		r.obs.put("after_end", deliveries(receive(consumer, 5, settle)))
	} else {
		r.obs.put("after_end", deliveries(within(consumer, quiet)))
	}
	fresh, err := r.producer(topic, false)
	if err != nil {
		return err
	}
	if _, err := sendAll(fresh, nil, "p-0", "p-1"); err != nil {
		return err
	}
	r.obs.put("plain_after", deliveries(receive(consumer, 2, settle)))
	r.obs.put("extra", deliveries(within(consumer, extra)))
	return nil
}

// batchAfterTxn <topic> commit|abort: a batching producer sends t-0..t-4 in a transaction that then ends, and
// sends s-0, s-1 without one: whether those sends succeed. The client clears the transaction id of its batch only
// when a batch starts with a transactional message, so these batches carry the ended transaction's id.
func batchAfterTxn(r *run, args []string) error {
	topic, commit := arg(args, 0), flag(args, 1, "commit")
	producer, err := r.producer(topic, true)
	if err != nil {
		return err
	}
	txn, err := r.newTxn()
	if err != nil {
		return err
	}
	if _, err := sendAll(producer, txn, payloads("t", 5)...); err != nil {
		return err
	}
	r.obs.put("end_error", outcome(end(txn, commit)))
	_, err = sendAll(producer, nil, "s-0", "s-1")
	r.obs.put("send_error", outcome(err))
	return nil
}

// txnAckAbort <topic> [Shared|Failover|Exclusive] (Pulsar's TransactionEndToEndTest.txnAckTest): 10 plain
// messages, all acknowledged in txn1: nothing comes back while it is open; it aborts and the 10 come back; they are
// acknowledged in txn2, which commits, and nothing comes back, even after resubscribing.
func txnAckAbort(r *run, args []string) error {
	topic := arg(args, 0)
	spec := consumerSpec{subscription: "sub", kind: subscriptionType(args, 1, "Shared")}
	r.obs.put("subscription_type", argOr(args, 1, "Shared"))
	consumer, err := r.consumer(topic, spec)
	if err != nil {
		return err
	}
	producer, err := r.producer(topic, false)
	if err != nil {
		return err
	}
	if _, err := sendAll(producer, nil, payloads("m", 10)...); err != nil {
		return err
	}
	first := receive(consumer, 10, settle)
	r.obs.put("first_received", deliveries(first))
	txn1, err := r.newTxn()
	if err != nil {
		return err
	}
	r.obs.put("txn1_ack_errors", ackAllWithTxn(consumer, first, txn1))
	r.obs.put("before_abort", deliveries(within(consumer, quiet)))
	r.obs.put("abort_error", outcome(end(txn1, false)))
	again := receive(consumer, 10, settle)
	r.obs.put("after_abort", deliveries(again))
	r.obs.put("after_abort_extra", deliveries(within(consumer, extra)))
	txn2, err := r.newTxn()
	if err != nil {
		return err
	}
	r.obs.put("txn_ids", []string{txnID(txn1), txnID(txn2)})
	r.obs.put("txn2_ack_errors", ackAllWithTxn(consumer, again, txn2))
	r.obs.put("commit_error", outcome(end(txn2, true)))
	r.obs.put("after_commit", deliveries(within(consumer, quiet)))
	consumer.Close()
	return resubscribe(r, topic, spec, "after_resubscribe")
}

// txnBatchAck <topic> commit|abort [Exclusive|Shared|Failover|KeyShared] (issue 19, defect 2, as far as the Go client goes: it acknowledges in a
// transaction only individually): one batch of 10 to a consumer (Exclusive by default) with batch-index acknowledgement; a
// transaction acknowledges m-0..m-4 one by one, then ends. What arrives without asking, then after resubscribing.
func txnBatchAck(r *run, args []string) error {
	topic, commit := arg(args, 0), flag(args, 1, "commit")
	spec := consumerSpec{subscription: "sub", kind: subscriptionType(args, 2, "Exclusive"), batchIndexAck: true}
	r.obs.put("subscription_type", argOr(args, 2, "Exclusive"))
	got, err := sendBatchAndReceive(r, topic, spec)
	if err != nil {
		return err
	}
	txn, err := r.newTxn()
	if err != nil {
		return err
	}
	r.obs.put("txn_id", txnID(txn))
	half := got.messages[:min(5, len(got.messages))]
	r.obs.put("txn_ack_errors", ackAllWithTxn(got.consumer, half, txn))
	r.obs.put("before_end", deliveries(within(got.consumer, extra)))
	r.obs.put("end_error", outcome(end(txn, commit)))
	r.obs.put("after_end", deliveries(within(got.consumer, quiet)))
	got.consumer.Close()
	return resubscribe(r, topic, spec, "after_resubscribe")
}

// failoverTxnAcks <topic> (issue 19, defect 3): f-0..f-4 to a Failover consumer; txn1 acknowledges f-0 and
// aborts, txn2 acknowledges f-1 and aborts. What is redelivered without asking, then after every message received
// so far is negatively acknowledged (the client's way to ask for a redelivery), then after resubscribing.
func failoverTxnAcks(r *run, args []string) error {
	topic := arg(args, 0)
	spec := consumerSpec{subscription: "sub", kind: pulsar.Failover}
	consumer, err := r.consumer(topic, spec)
	if err != nil {
		return err
	}
	producer, err := r.producer(topic, false)
	if err != nil {
		return err
	}
	if _, err := sendAll(producer, nil, payloads("f", 5)...); err != nil {
		return err
	}
	first := receive(consumer, 5, settle)
	r.obs.put("first_received", deliveries(first))
	if len(first) < 2 {
		return fmt.Errorf("received %d of 5 messages", len(first))
	}
	var ids []string
	for i, m := range first[:2] {
		txn, err := r.newTxn()
		if err != nil {
			return err
		}
		ids = append(ids, txnID(txn))
		r.obs.put(fmt.Sprintf("txn%d_ack_error", i+1), outcome(consumer.AckWithTxn(m, txn)))
		r.obs.put(fmt.Sprintf("txn%d_abort_error", i+1), outcome(end(txn, false)))
	}
	r.obs.put("txn_ids", ids)
	redelivered := within(consumer, quiet)
	r.obs.put("after_aborts", deliveries(redelivered))
	for _, m := range append(first, redelivered...) {
		consumer.Nack(m)
	}
	r.obs.put("after_nacks", deliveries(drain(consumer, quiet)))
	consumer.Close()
	return resubscribe(r, topic, spec, "after_resubscribe")
}

// seek <topic> id|earliest|latest [batched]: 10 messages received and acknowledged by an Exclusive consumer,
// which then seeks to m-3's id, to the earliest or to the latest position: what comes next, then a new message.
func seek(r *run, args []string) error {
	topic, target, batched := arg(args, 0), arg(args, 1), flag(args, 2, "batched")
	consumer, err := r.consumer(topic, exclusive)
	if err != nil {
		return err
	}
	producer, err := r.producer(topic, batched)
	if err != nil {
		return err
	}
	ids, err := sendAll(producer, nil, payloads("m", 10)...)
	if err != nil {
		return err
	}
	r.obs.put("send_ids", positions(ids))
	got := receive(consumer, 10, settle)
	errs := make([]error, len(got))
	for i, m := range got {
		errs[i] = consumer.Ack(m)
	}
	r.obs.put("ack_errors", outcomes(errs))
	var to pulsar.MessageID
	switch target {
	case "id":
		to = ids[3]
	case "earliest":
		// The client's own EarliestMessageID has no partition, which Consumer.Seek refuses before sending.
		r.obs.put("seek_builtin_earliest_error", outcome(consumer.Seek(pulsar.EarliestMessageID())))
		to = pulsar.NewMessageID(-1, -1, -1, 0)
	case "latest":
		to = pulsar.NewMessageID(math.MaxInt64, math.MaxInt64, -1, 0)
	default:
		return fmt.Errorf("unknown seek target %q", target)
	}
	r.obs.put("seek_error", outcome(consumer.Seek(to)))
	r.obs.put("after_seek", deliveries(drain(consumer, quiet)))
	if _, err := sendAll(producer, nil, "new"); err != nil {
		return err
	}
	r.obs.put("new_after_seek", deliveries(receive(consumer, 1, settle)))
	return nil
}

// readerStart <topic> <index>|earliest|latest [inclusive] [batched]: 10 messages, then a reader starting at the
// index-th message's id (or earliest/latest), inclusive or not: what it reads, and whether it has more.
func readerStart(r *run, args []string) error {
	topic, start, inclusive, batched := arg(args, 0), arg(args, 1), flag(args, 2, "inclusive"), flag(args, 3, "batched")
	producer, err := r.producer(topic, batched)
	if err != nil {
		return err
	}
	ids, err := sendAll(producer, nil, payloads("m", 10)...)
	if err != nil {
		return err
	}
	r.obs.put("send_ids", positions(ids))
	var from pulsar.MessageID
	switch start {
	case "earliest":
		from = pulsar.EarliestMessageID()
	case "latest":
		from = pulsar.LatestMessageID()
	default:
		index, err := strconv.Atoi(start)
		if err != nil {
			return err
		}
		from = ids[index]
	}
	reader, err := r.reader(topic, from, inclusive)
	if err != nil {
		return err
	}
	r.obs.put("read", deliveries(read(reader, 10, quiet)))
	r.obs.put("has_next", reader.HasNext())
	return nil
}

// ---------------------------------------------------------------- helpers

type batchReceived struct {
	consumer pulsar.Consumer
	messages []pulsar.Message
}

// sendBatchAndReceive subscribes, sends m-0..m-9 as one batch and receives them.
func sendBatchAndReceive(r *run, topic string, spec consumerSpec) (batchReceived, error) {
	consumer, err := r.consumer(topic, spec)
	if err != nil {
		return batchReceived{}, err
	}
	producer, err := r.producer(topic, true)
	if err != nil {
		return batchReceived{}, err
	}
	ids, err := sendAll(producer, nil, payloads("m", batchSize)...)
	if err != nil {
		return batchReceived{}, err
	}
	r.obs.put("send_ids", positions(ids))
	got := receive(consumer, batchSize, settle)
	r.obs.put("received", deliveries(got))
	return batchReceived{consumer, got}, nil
}

// resubscribe subscribes again and records under key what arrives until nothing more does for a while. A Failover
// subscription's dispatcher waits a second after a change of active consumer (Pulsar's
// activeConsumerFailoverDelayTimeMillis), so the first message is waited for longer there.
func resubscribe(r *run, topic string, spec consumerSpec, key string) error {
	consumer, err := r.consumer(topic, spec)
	if err != nil {
		return err
	}
	first := quiet
	if spec.kind == pulsar.Failover {
		first = 3 * time.Second
	}
	r.obs.put(key, deliveries(drain(consumer, first)))
	return nil
}

func ackAllWithTxn(c pulsar.Consumer, messages []pulsar.Message, txn pulsar.Transaction) []any {
	errs := make([]error, len(messages))
	for i, m := range messages {
		errs[i] = c.AckWithTxn(m, txn)
	}
	return outcomes(errs)
}

func end(txn pulsar.Transaction, commit bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if commit {
		return txn.Commit(ctx)
	}
	return txn.Abort(ctx)
}

func arg(args []string, index int) string {
	if index >= len(args) {
		panic(fmt.Sprintf("missing argument #%d", index+1))
	}
	return args[index]
}

func argOr(args []string, index int, fallback string) string {
	if index < len(args) {
		return args[index]
	}
	return fallback
}

func flag(args []string, index int, name string) bool {
	return index < len(args) && args[index] == name
}

func subscriptionType(args []string, index int, fallback string) pulsar.SubscriptionType {
	switch argOr(args, index, fallback) {
	case "Exclusive":
		return pulsar.Exclusive
	case "Failover":
		return pulsar.Failover
	case "KeyShared":
		return pulsar.KeyShared
	case "Shared":
		return pulsar.Shared
	default:
		panic("unknown subscription type " + args[index])
	}
}

// txnChunkAck <topic> <payload bytes> (the Go client's TestTxn_AckChunkMessage): a chunked message sent in a
// transaction gives a chunked message id; received, acknowledged in a transaction that aborts, received again after
// resubscribing, acknowledged in one that commits; nothing comes back after that.
func txnChunkAck(r *run, args []string) error {
	topic := arg(args, 0)
	var size int
	if _, err := fmt.Sscan(arg(args, 1), &size); err != nil {
		return err
	}
	producer, err := r.client.CreateProducer(pulsar.ProducerOptions{
		Topic: topic, Name: "chunker", EnableChunking: true, DisableBatching: true, SendTimeout: 30 * time.Second,
	})
	if err != nil {
		return err
	}
	r.closers = append(r.closers, producer.Close)
	consumer, err := r.consumer(topic, exclusive)
	if err != nil {
		return err
	}
	txn, err := r.newTxn()
	if err != nil {
		return err
	}
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, err := producer.Send(ctx, &pulsar.ProducerMessage{Payload: payload, Transaction: txn})
	r.obs.put("send_error", outcome(err))
	r.obs.put("message_id_type", fmt.Sprintf("%T", id))
	r.obs.put("commit_error", outcome(end(txn, true)))
	first := receive(consumer, 1, settle)
	r.obs.put("first_sizes", sizes(first))
	txn2, err := r.newTxn()
	if err != nil {
		return err
	}
	r.obs.put("txn2_ack_errors", ackAllWithTxn(consumer, first, txn2))
	r.obs.put("abort_error", outcome(end(txn2, false)))
	consumer.Close()
	consumer, err = r.consumer(topic, exclusive)
	if err != nil {
		return err
	}
	again := receive(consumer, 1, settle)
	r.obs.put("again_sizes", sizes(again))
	txn3, err := r.newTxn()
	if err != nil {
		return err
	}
	r.obs.put("txn3_ack_errors", ackAllWithTxn(consumer, again, txn3))
	r.obs.put("txn3_commit_error", outcome(end(txn3, true)))
	consumer.Close()
	consumer, err = r.consumer(topic, exclusive)
	if err != nil {
		return err
	}
	r.obs.put("after_commit_sizes", sizes(within(consumer, quiet)))
	return nil
}

func sizes(messages []pulsar.Message) []int {
	out := make([]int, len(messages))
	for i, m := range messages {
		out[i] = len(m.Payload())
	}
	return out
}

// keySharedSpread <topic> <name prefix>|same-<name> (the Go client's TestConsumerKeyShared, whose consumers get random
// names; here names are given so that the hash ring is the same on every broker): two Key_Shared consumers, 100 messages on the keys key-shared-0..2;
// how many each consumer gets, and which keys.
func keySharedSpread(r *run, args []string) error {
	topic, prefix := arg(args, 0), arg(args, 1)
	names := []string{prefix + "-1", prefix + "-2"}
	if strings.HasPrefix(prefix, "same-") {
		names = []string{prefix, prefix} // one name twice: the ring tells them apart by their index among that name
	}
	var consumers []pulsar.Consumer
	for _, name := range names {
		c, err := r.client.Subscribe(pulsar.ConsumerOptions{
			Topic: topic, SubscriptionName: "sub-1", Type: pulsar.KeyShared, Name: name,
		})
		if err != nil {
			return err
		}
		r.closers = append(r.closers, c.Close)
		consumers = append(consumers, c)
	}
	producer, err := r.producer(topic, false)
	if err != nil {
		return err
	}
	for i := 0; i < 100; i++ {
		msg := &pulsar.ProducerMessage{Key: fmt.Sprintf("key-shared-%d", i%3), Payload: []byte(fmt.Sprintf("value-%d", i))}
		if _, err := producer.Send(context.Background(), msg); err != nil {
			return err
		}
	}
	counts := []int{0, 0}
	keys := []map[string]bool{{}, {}}
	deadline := time.After(10 * time.Second)
	for counts[0]+counts[1] < 100 {
		select {
		case cm := <-consumers[0].Chan():
			counts[0]++
			keys[0][cm.Key()] = true
			_ = consumers[0].Ack(cm.Message)
		case cm := <-consumers[1].Chan():
			counts[1]++
			keys[1][cm.Key()] = true
			_ = consumers[1].Ack(cm.Message)
		case <-deadline:
			r.obs.put("timed_out", true)
			counts = append(counts, -1)
		}
		if len(counts) > 2 {
			break
		}
	}
	r.obs.put("received", counts[:2])
	for i, k := range keys {
		names := make([]string, 0, len(k))
		for key := range k {
			names = append(names, key)
		}
		sort.Strings(names)
		r.obs.put(fmt.Sprintf("keys_%d", i+1), names)
	}
	return nil
}

// adminCreatePartitioned <admin url> <topic> <topic with properties> (the Go admin client's topic creation, whose
// body is a PartitionedTopicMetadata sent with its content type, properties null when none are given): a topic with
// 4 partitions, one with 2 and properties; what the admin API reads back.
func adminCreatePartitioned(r *run, args []string) error {
	admin, err := pulsaradmin.NewClient(secureAdmin(&config.Config{WebServiceURL: arg(args, 0)}))
	if err != nil {
		return err
	}
	for key, spec := range map[string][2]string{"plain": {arg(args, 1), ""}, "with_properties": {arg(args, 2), "v"}} {
		name, err := utils.GetTopicName(spec[0])
		if err != nil {
			return err
		}
		partitions := 4
		var properties map[string]string
		if spec[1] != "" {
			partitions, properties = 2, map[string]string{"k": spec[1]}
		}
		r.obs.put(key+"_create_error", outcome(admin.Topics().CreateWithProperties(*name, partitions, properties)))
		metadata, err := admin.Topics().GetMetadata(*name)
		if err != nil {
			r.obs.put(key+"_metadata_error", outcome(err))
			continue
		}
		r.obs.put(key+"_partitions", metadata.Partitions)
		got, err := admin.Topics().GetProperties(*name)
		r.obs.put(key+"_properties", got)
		r.obs.put(key+"_properties_error", outcome(err))
	}
	return nil
}
