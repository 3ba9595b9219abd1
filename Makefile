# Set-up and everyday commands. Everything installs into .venv (created when missing).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
ARGS ?=

.PHONY: run test test-containers image lint proto bench bench-txn bench-spark bench-compare bench-container demo spark-cluster-demo conformance crash-loop fuzz model clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@ $(VENV)/.installed

## run: install and start the server on the embedded store (ARGS="--port 6651" to pass options)
run: $(VENV)/.installed
	$(BIN)/pulsar-txn-proxy serve $(ARGS)

## test: install with test extras and run the suite on local processes (the container tests: make test-containers),
## on TEST_WORKERS parallel workers (default 2; TEST_WORKERS=0 runs in one process); prints the 20 slowest tests
TEST_WORKERS ?= 2
test: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check wire engine proxy
	$(BIN)/python -m pytest -m "not container" -n $(TEST_WORKERS) --dist loadgroup --durations=20 $(ARGS)

## test-containers: build the image and run the container-marked tests (Docker, else podman set up as root)
test-containers: $(VENV)/.installed-test
	compose/with-engine.sh sh -c '$(BIN)/python compose/build_image.py && $(BIN)/python -m pytest -m container $(ARGS)'

## image: build the endpoint's container image without a registry (ARGS="--spark" for the pipeline's image)
image: $(VENV)/.installed
	compose/with-engine.sh $(BIN)/python compose/build_image.py $(ARGS)

lint: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check wire engine proxy

## proto: regenerate wire/pulsar_api_pb2.py from wire/pulsar_api.proto
proto: | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev]'
	$(BIN)/python -m grpc_tools.protoc -I wire --python_out=wire --pyi_out=wire wire/pulsar_api.proto

## demo: the Spark pipeline example end to end (endpoint, sample data, PySpark in local mode)
demo: $(VENV)/.installed-test
	$(BIN)/pulsar-txn-proxy demo $(ARGS)

## spark-cluster-demo: the demo pipeline on a local Spark standalone cluster (a master and 2 workers started with
## PySpark's spark-class, the job sent with spark-submit --master spark://...), then the cluster is stopped
spark-cluster-demo: $(VENV)/.installed-test
	$(BIN)/python -m spark.cluster $(ARGS)

## conformance: the conformance suite against this endpoint and a real Apache Pulsar 4.2.4 side by side (Java 17+,
## Maven; ARGS="--record-golden" re-records tests/conformance/golden), then the transaction workload, 60 s on each
conformance: $(VENV)/.installed-test
	$(BIN)/python -m pytest tests/conformance --conformance-target both $(ARGS)
	$(BIN)/python -m tests.conformance.workload --target endpoint --seed 11 --seconds 60 --kill-restarts 3
	$(BIN)/python -m tests.conformance.workload --target pulsar --seed 11 --seconds 60

## crash-loop: the exactly-once loop of issue 19 at full size (2,000 inputs, the endpoint SIGKILLed 2 times; set
## CRASH_LOOP_INPUTS / CRASH_LOOP_KILLS to change them)
crash-loop: $(VENV)/.installed-test
	CRASH_LOOP_INPUTS=$${CRASH_LOOP_INPUTS:-2000} CRASH_LOOP_KILLS=$${CRASH_LOOP_KILLS:-2} \
		$(BIN)/python -m pytest tests/test_crash_loop.py -s $(ARGS)

## model: the subscription model test (tests/subscription_model.py) for 30 minutes on a local server; prints the
## examples run and the failures (ARGS="--service-url pulsar://host:6650" runs it against a broker, without restarts)
model: $(VENV)/.installed-test
	$(BIN)/python -m tests.model_run --minutes 30 $(ARGS)

## bench-compare: this endpoint and a Pulsar standalone side by side with pulsar-perf; rewrites bench/RESULTS.md
bench-compare: $(VENV)/.installed-test
	$(BIN)/python bench/compare.py --seconds 10 --pulsar-fsync --results bench/RESULTS.md $(ARGS)

## bench-container: container start to the first CONNECT answered (Docker, else podman set up as root)
bench-container: $(VENV)/.installed-test
	compose/with-engine.sh sh -c '$(BIN)/python compose/build_image.py && $(BIN)/python bench/container.py $(ARGS)'

## fuzz: 1,000,000 mutated frames beside an official-client witness, then a kill and restart; prints frames/s,
## tracebacks, failed witness sends, stalls, blocked topics, RSS peak, witness latency and losses (ARGS="--seed 7")
fuzz: $(VENV)/.installed-test
	$(BIN)/python -m tests.fuzz.harness --frames 1000000 $(ARGS)

## bench: the core messaging benchmark
bench: $(VENV)/.installed-test
	$(BIN)/python bench/core.py $(ARGS)

## bench-txn: transactions per second, the cost of a transaction, recovery time
bench-txn: $(VENV)/.installed-test
	$(BIN)/python bench/txn.py $(ARGS)

## bench-spark: the Spark connector and pipeline figures
bench-spark: $(VENV)/.installed-test
	$(BIN)/python bench/spark.py $(ARGS)

clean:
	rm -rf $(VENV) data build *.egg-info
