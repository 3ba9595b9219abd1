# Set-up and everyday commands. Everything installs into .venv (created when missing).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
ARGS ?=

.PHONY: run test test-containers image lint proto bench bench-txn bench-spark bench-compare bench-scale bench-container demo spark-cluster-demo conformance crash-loop fuzz model bench-plugin go-suite python-suite txn-client-crash-loop bench-python-client sim clean

# The venv's own pip is used as it comes (pip 21.3+ installs this project editable; upgrading it cost a download).
# It does not compile the installed packages (--no-compile: ~35 s of the install's ~65 s of CPU, for thousands of
# modules the tests never import); Python writes the bytecode of the modules used on first import instead.
# That needs bytecode writing on, also where the environment turns it off (PYTHONDONTWRITEBYTECODE=1): else every
# process the tests start (servers, clients, CLI runs, pytest workers) compiles the project's modules again (~0.4 s
# of CPU a server start, ~4 s a pytest collection).
export PIP_DISABLE_PIP_VERSION_CHECK := 1
export PYTHONDONTWRITEBYTECODE :=
PIP_INSTALL := $(BIN)/pip install --quiet --no-compile
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(PIP_INSTALL) -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(PIP_INSTALL) -e '.[test]'
	touch $@ $(VENV)/.installed

## run: install and start the server on the embedded store (ARGS="--port 6651" to pass options)
run: $(VENV)/.installed
	$(BIN)/pulsar-txn-proxy serve $(ARGS)

## test: install with test extras and run the suite on local processes (the container tests: make test-containers),
## on TEST_WORKERS parallel workers (default 4: the suite mostly waits on servers, clients and JVMs, and on 2 cores
## 3 workers kept the load average under 2; TEST_WORKERS=0 runs in one process); prints the 20 slowest tests
TEST_WORKERS ?= 4
test: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check wire engine proxy pulsar_txn pulsar_txn_proxy
	$(BIN)/python -m pytest -m "not container" -n $(TEST_WORKERS) --dist loadgroup --durations=20 $(ARGS)

## test-containers: build the image and run the container-marked tests (Docker, else podman set up as root)
test-containers: $(VENV)/.installed-test
	compose/with-engine.sh sh -c '$(BIN)/python compose/build_image.py && $(BIN)/python -m pytest -m container $(ARGS)'

## image: build the endpoint's container image without a registry (ARGS="--spark" for the pipeline's image)
image: $(VENV)/.installed
	compose/with-engine.sh $(BIN)/python compose/build_image.py $(ARGS)

lint: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check wire engine proxy pulsar_txn pulsar_txn_proxy

## proto: regenerate wire/pulsar_api_pb2.py from wire/pulsar_api.proto
proto: | $(BIN)/python
	$(PIP_INSTALL) -e '.[dev]'
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

## go-suite: the official Go client's own tests (pulsar-client-go, pulsar/ and pulsaradmin/, tests/go/go.mod's version)
## against this endpoint and a Pulsar 4.2.4 standalone, each set up as that suite's CI broker in a network namespace
## of its own (root: unshare -n); results per target in build/go-suite/results (ARGS="--target endpoint")
go-suite: $(VENV)/.installed-test
	$(BIN)/python -m tests.go_suite $(ARGS)

## python-suite: the official Python client's own tests (pulsar-client-python's tests/ at the installed client's tag)
## against this endpoint, then a Pulsar 4.2.4 standalone, each set up as that suite's CI broker in a network namespace
## of its own (root: unshare -n); results per target in build/python-suite/results (ARGS="--target endpoint",
## "--source DIR" for a local clone of pulsar-client-python, else it is cloned from GitHub)
python-suite: $(VENV)/.installed-test
	$(BIN)/python -m tests.python_suite $(ARGS)

## crash-loop: the exactly-once loop of issue 19 at full size (2,000 inputs, the endpoint SIGKILLed 2 times; set
## CRASH_LOOP_INPUTS / CRASH_LOOP_KILLS to change them)
crash-loop: $(VENV)/.installed-test
	CRASH_LOOP_INPUTS=$${CRASH_LOOP_INPUTS:-2000} CRASH_LOOP_KILLS=$${CRASH_LOOP_KILLS:-2} \
		$(BIN)/python -m pytest tests/test_crash_loop.py -s $(ARGS)

## txn-client-crash-loop: pulsar_txn's consume-transform-produce loop through a broker SIGKILL at full size (10,000
## messages; PULSAR_TXN_CRASH_MESSAGES changes it)
txn-client-crash-loop: $(VENV)/.installed-test
	PULSAR_TXN_CRASH_MESSAGES=$${PULSAR_TXN_CRASH_MESSAGES:-10000} $(BIN)/python -m pytest tests/test_pulsar_txn_crash.py -s $(ARGS)

## bench-python-client: pulsar_txn's produce, consume and transaction rates beside the official Python client's
bench-python-client: $(VENV)/.installed-test
	$(BIN)/python bench/python_client.py $(ARGS)

## model: the subscription model test (tests/subscription_model.py) for 30 minutes on a local server; prints the
## examples run and the failures (ARGS="--service-url pulsar://host:6650" runs it against a broker, without restarts)
model: $(VENV)/.installed-test
	$(BIN)/python -m tests.model_run --minutes 30 $(ARGS)

## sim: the deterministic simulation of the whole server (tests/sim), 100,000 seeded fault scenarios on every core;
## ARGS="--seeds N --first-seed S" for fewer, "--seed S --print-trace-hash" to replay one, "--list-mutations",
## "--mutation NAME" to run with a defect put back
sim: $(VENV)/.installed-test
	$(BIN)/python -m tests.sim $(ARGS)

## bench-compare: this endpoint and a Pulsar standalone side by side with pulsar-perf (throughput, latency and the
## server's CPU time per message and per transaction; each row 3 times, median and range); rewrites bench/RESULTS.md
bench-compare: $(VENV)/.installed-test
	$(BIN)/python bench/compare.py --seconds 10 --pulsar-fsync --results bench/RESULTS.md $(ARGS)

$(VENV)/.installed-bench: pyproject.toml | $(BIN)/python
	$(PIP_INSTALL) -e '.[test,bench]'
	touch $@ $(VENV)/.installed-test $(VENV)/.installed

## bench-scale: how cost grows with the work (topics, subscriptions, backlog, open transactions, connections, disk
## after retention), tables in bench/SCALE.md and plots in bench/scale/ (ARGS="--full" for the large points,
## "--pulsar" for the same points on a Pulsar standalone, "--only topics,backlog" for some sweeps, "--render
## bench/scale/results.json" to redraw saved figures; bench/scale/notes.md, what shapes the curves, goes above the tables)
bench-scale: $(VENV)/.installed-bench
	$(BIN)/python bench/scale.py $(ARGS)

## bench-container: container start to the first CONNECT answered (Docker, else podman set up as root)
bench-container: $(VENV)/.installed-test
	compose/with-engine.sh sh -c '$(BIN)/python compose/build_image.py && $(BIN)/python bench/container.py $(ARGS)'

## bench-plugin: pytest to the first test of examples/pytest-sample on the pytest plugin's endpoint, beside the same
## suite on a Pulsar standalone started in the session (ARGS="--no-pulsar" leaves Pulsar out)
bench-plugin: $(VENV)/.installed-test
	$(BIN)/python bench/plugin_startup.py $(ARGS)

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
