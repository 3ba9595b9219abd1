package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"sync"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

const (
	// quiet is the window of "receives nothing within" checks.
	quiet = time.Second
	// extra is how long to look for more messages (duplicates, leaks) after the expected ones arrived.
	extra = 300 * time.Millisecond
	// gap is how long drain waits for one more message.
	gap = 500 * time.Millisecond
	// longTxn is the timeout of transactions that must stay open for the whole scenario.
	longTxn = 60 * time.Second
	// sendTimeout bounds a send (the client retries a send the broker refused until then).
	sendTimeout = 5 * time.Second
	// wait bounds a single client call that takes a context.
	wait = 15 * time.Second
	// settle is how long expected messages are waited for (the wait ends once they are all in): generous, so that
	// a loaded machine observes the same; a broker that delivers fewer only costs this wait.
	settle = 30 * time.Second
)

// observations is what a scenario saw, by name; safe for the deadline's goroutine to read.
type observations struct {
	mu     sync.Mutex
	values map[string]any
}

func newObservations() *observations {
	return &observations{values: map[string]any{}}
}

func (o *observations) put(key string, value any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.values[key] = value
}

func (o *observations) snapshot() map[string]any {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make(map[string]any, len(o.values))
	for k, v := range o.values {
		out[k] = v
	}
	return out
}

// run is one scenario's client, observations and the producers and consumers to close at its end.
type run struct {
	client  pulsar.Client
	obs     *observations
	closers []func()
}

func (r *run) closeAll() {
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
}

// producer makes a producer; a batching one puts everything sent before a flush into one batch.
func (r *run) producer(topic string, batched bool) (pulsar.Producer, error) {
	p, err := r.client.CreateProducer(pulsar.ProducerOptions{
		Topic:                   topic,
		DisableBatching:         !batched,
		BatchingMaxMessages:     100,
		BatchingMaxPublishDelay: time.Second,
		SendTimeout:             sendTimeout,
	})
	if err == nil {
		r.closers = append(r.closers, p.Close)
	}
	return p, err
}

// consumerSpec is how a scenario subscribes: acknowledgements always wait for the broker's receipt.
type consumerSpec struct {
	subscription  string
	kind          pulsar.SubscriptionType
	batchIndexAck bool
}

func (r *run) consumer(topic string, spec consumerSpec) (pulsar.Consumer, error) {
	c, err := r.client.Subscribe(pulsar.ConsumerOptions{
		Topic:                          topic,
		SubscriptionName:               spec.subscription,
		Type:                           spec.kind,
		SubscriptionInitialPosition:    pulsar.SubscriptionPositionEarliest,
		AckWithResponse:                true,
		EnableBatchIndexAcknowledgment: spec.batchIndexAck,
		NackRedeliveryDelay:            100 * time.Millisecond,
	})
	if err == nil {
		r.closers = append(r.closers, c.Close)
	}
	return c, err
}

func (r *run) reader(topic string, start pulsar.MessageID, inclusive bool) (pulsar.Reader, error) {
	reader, err := r.client.CreateReader(pulsar.ReaderOptions{
		Topic:                   topic,
		StartMessageID:          start,
		StartMessageIDInclusive: inclusive,
	})
	if err == nil {
		r.closers = append(r.closers, reader.Close)
	}
	return reader, err
}

func (r *run) newTxn() (pulsar.Transaction, error) {
	return r.client.NewTransaction(longTxn)
}

// sendAll sends the payloads asynchronously (one batch on a batching producer), flushes, and waits for every
// receipt; the ids in payload order.
func sendAll(p pulsar.Producer, txn pulsar.Transaction, payloads ...string) ([]pulsar.MessageID, error) {
	ids := make([]pulsar.MessageID, len(payloads))
	errs := make([]error, len(payloads))
	var done sync.WaitGroup
	for i, payload := range payloads {
		done.Add(1)
		msg := &pulsar.ProducerMessage{Payload: []byte(payload)}
		if txn != nil {
			msg.Transaction = txn
		}
		p.SendAsync(context.Background(), msg, func(id pulsar.MessageID, _ *pulsar.ProducerMessage, err error) {
			ids[i], errs[i] = id, err
			done.Done()
		})
	}
	if err := p.Flush(); err != nil {
		return nil, err
	}
	done.Wait()
	return ids, errors.Join(errs...)
}

// payloads names count messages prefix-0, prefix-1...
func payloads(prefix string, count int) []string {
	out := make([]string, count)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// receive returns messages until count arrived or timeout passed.
func receive(c pulsar.Consumer, count int, timeout time.Duration) []pulsar.Message {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var got []pulsar.Message
	for len(got) < count {
		msg, err := c.Receive(ctx)
		if err != nil {
			break
		}
		got = append(got, msg)
	}
	return got
}

// drain returns messages until none arrives for gap (for first, before the first one).
func drain(c pulsar.Consumer, first time.Duration) []pulsar.Message {
	var got []pulsar.Message
	for {
		timeout := gap
		if len(got) == 0 {
			timeout = first
		}
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		msg, err := c.Receive(ctx)
		cancel()
		if err != nil {
			return got
		}
		got = append(got, msg)
	}
}

// within returns everything that arrives within window.
func within(c pulsar.Consumer, window time.Duration) []pulsar.Message {
	return receive(c, math.MaxInt, window)
}

// read returns messages of a reader until count arrived or timeout passed.
func read(reader pulsar.Reader, count int, timeout time.Duration) []pulsar.Message {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var got []pulsar.Message
	for len(got) < count {
		msg, err := reader.Next(ctx)
		if err != nil {
			break
		}
		got = append(got, msg)
	}
	return got
}

// deliveries describes messages in arrival order: payload, id and redelivery count.
func deliveries(messages []pulsar.Message) []map[string]any {
	out := make([]map[string]any, 0, len(messages))
	for _, m := range messages {
		out = append(out, map[string]any{
			"payload":          string(m.Payload()),
			"id":               position(m.ID()),
			"redelivery_count": m.RedeliveryCount(),
		})
	}
	return out
}

// position is ledger:entry:batchIndex of a message id (batch index -1 outside a batch).
func position(id pulsar.MessageID) string {
	return fmt.Sprintf("%d:%d:%d", id.LedgerID(), id.EntryID(), id.BatchIdx())
}

func positions(ids []pulsar.MessageID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = position(id)
	}
	return out
}

// txnID is most:least of a transaction's id.
func txnID(txn pulsar.Transaction) string {
	id := txn.GetTxnID()
	return fmt.Sprintf("%d:%d", id.MostSigBits, id.LeastSigBits)
}

// outcome is nil when err is nil, else its description.
func outcome(err error) any {
	if err == nil {
		return nil
	}
	return describe(err)
}

// outcomes describes one error per step, "ok" for a step that succeeded.
func outcomes(errs []error) []any {
	out := make([]any, len(errs))
	for i, err := range errs {
		if err == nil {
			out[i] = "ok"
		} else {
			out[i] = describe(err)
		}
	}
	return out
}

var (
	// A broker's error answer as the client words it: "server error: <ServerError>: <message>" for a command's
	// error, "ack response error: <ServerError>: <message>" for an acknowledgement's.
	brokerError = regexp.MustCompile(`^(?:server error|ack response error): (\w+):`)
	// A transaction coordinator's error answer: "<ServerError>: <Result>".
	coordinatorError = regexp.MustCompile(`^(\w+): (\w+)$`)
)

// describe is {type, message} of an error: type is the broker's ServerError name when the broker refused, else the
// client's Result name, else the Go error type.
func describe(err error) map[string]any {
	kind := fmt.Sprintf("%T", err)
	var clientErr *pulsar.Error
	switch {
	case errors.As(err, &clientErr):
		kind = resultName(clientErr.Result())
		if m := coordinatorError.FindStringSubmatch(clientErr.Error()); m != nil && m[2] == kind {
			kind = m[1]
		}
	case brokerError.MatchString(err.Error()):
		kind = brokerError.FindStringSubmatch(err.Error())[1]
	case errors.Is(err, context.DeadlineExceeded):
		kind = "DeadlineExceeded"
	}
	return map[string]any{"type": kind, "message": err.Error()}
}

func resultName(result pulsar.Result) string {
	if name, ok := resultNames[result]; ok {
		return name
	}
	return fmt.Sprintf("Result%d", result)
}

var resultNames = map[pulsar.Result]string{
	pulsar.UnknownError:                     "UnknownError",
	pulsar.InvalidConfiguration:             "InvalidConfiguration",
	pulsar.TimeoutError:                     "TimeoutError",
	pulsar.LookupError:                      "LookupError",
	pulsar.ConnectError:                     "ConnectError",
	pulsar.ReadError:                        "ReadError",
	pulsar.ConsumerBusy:                     "ConsumerBusy",
	pulsar.NotConnectedError:                "NotConnectedError",
	pulsar.AlreadyClosedError:               "AlreadyClosedError",
	pulsar.InvalidMessage:                   "InvalidMessage",
	pulsar.InvalidTopicName:                 "InvalidTopicName",
	pulsar.ServiceUnitNotReady:              "ServiceUnitNotReady",
	pulsar.OperationNotSupported:            "OperationNotSupported",
	pulsar.TopicNotFound:                    "TopicNotFound",
	pulsar.SubscriptionNotFound:             "SubscriptionNotFound",
	pulsar.ConsumerNotFound:                 "ConsumerNotFound",
	pulsar.TopicTerminated:                  "TopicTerminated",
	pulsar.ConsumerClosed:                   "ConsumerClosed",
	pulsar.SeekFailed:                       "SeekFailed",
	pulsar.ProducerClosed:                   "ProducerClosed",
	pulsar.InvalidStatus:                    "InvalidStatus",
	pulsar.TransactionNoFoundError:          "TransactionNoFoundError",
	pulsar.ProducerFenced:                   "ProducerFenced",
	pulsar.MaxConcurrentOperationsReached:   "MaxConcurrentOperationsReached",
	pulsar.TransactionCoordinatorNotEnabled: "TransactionCoordinatorNotEnabled",
}
