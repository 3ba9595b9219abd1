package main

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

func init() {
	scenarios["dead_letter_initial_subscription"] = deadLetterInitialSubscription
}

// deadLetterQuiet is how long a dead-letter scenario waits for one more delivery.
const deadLetterQuiet = 3 * time.Second

// deadLetterInitialSubscription <topic> <dlq> [initial]: three messages, a Shared consumer with a dead-letter policy
// (two deliveries; with initial, initial subscription dlq-sub) negatively acknowledges every delivery until quiet;
// then a consumer subscribes to the dead-letter topic as dlq-sub (at the latest position) and receives until quiet.
func deadLetterInitialSubscription(r *run, args []string) error {
	topic, dlq, initial := arg(args, 0), arg(args, 1), flag(args, 2, "initial")
	policy := &pulsar.DLQPolicy{MaxDeliveries: 2, DeadLetterTopic: dlq}
	if initial {
		policy.InitialSubscriptionName = "dlq-sub"
	}
	consumer, err := r.client.Subscribe(pulsar.ConsumerOptions{
		Topic:               topic,
		SubscriptionName:    "s",
		Type:                pulsar.Shared,
		NackRedeliveryDelay: 100 * time.Millisecond,
		DLQ:                 policy,
	})
	if err != nil {
		return err
	}
	r.closers = append(r.closers, consumer.Close)
	producer, err := r.producer(topic, false)
	if err != nil {
		return err
	}
	if _, err := sendAll(producer, nil, payloads("m", 3)...); err != nil {
		return err
	}
	delivered := []string{}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), deadLetterQuiet)
		msg, err := consumer.Receive(ctx)
		cancel()
		if err != nil {
			break
		}
		delivered = append(delivered, fmt.Sprintf("%s@%d", msg.Payload(), msg.RedeliveryCount()))
		consumer.Nack(msg)
	}
	sort.Strings(delivered)
	r.obs.put("delivered", delivered)
	late, err := r.client.Subscribe(pulsar.ConsumerOptions{Topic: dlq, SubscriptionName: "dlq-sub"})
	if err != nil {
		return err
	}
	r.closers = append(r.closers, late.Close)
	deadLettered := []string{}
	for _, m := range drain(late, deadLetterQuiet) {
		deadLettered = append(deadLettered, string(m.Payload()))
		late.Ack(m)
	}
	sort.Strings(deadLettered)
	r.obs.put("dead_lettered", deadLettered)
	return nil
}
