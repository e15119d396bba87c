# Lahar: the two commands a user needs are `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench chaos fuzz clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/lahar demo

# pytest exits 5 when it collects no tests; that is not a failure of the suite.
test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS); rc=$$?; if [ $$rc -eq 5 ]; then exit 0; else exit $$rc; fi

lint: $(STAMP)
	$(BIN)/ruff check libs services tests
	$(BIN)/mypy libs/lahar services/scheduler/lahar_scheduler services/cache/lahar_cache services/binder/lahar_binder services/admission/lahar_admission services/controller/lahar_controller

# Every benchmark the README quotes; each prints its figures (use --output json for machines).
bench: $(STAMP)
	$(BIN)/lahar bench scheduler --nodes 5000 --pods 50000 --tasks-per-job 10
	$(BIN)/lahar bench e2e --nodes 1000 --jobs 500 --tasks-per-job 20
	@# The same workload on kube-apiserver + KWOK (needs Go for the first build of the binaries).
	@if command -v go >/dev/null || $(BIN)/python -c 'import sys; from lahar.kube.build import cached; sys.exit(not cached())'; \
	then $(BIN)/lahar bench e2e --nodes 1000 --jobs 500 --tasks-per-job 20 --control-plane kube; \
	else echo "bench e2e --control-plane kube skipped: the Go toolchain is not installed"; fi
	$(BIN)/lahar bench sim
	$(BIN)/lahar bench admission
	$(BIN)/lahar bench controller --jobs 1000 --pods-per-job 10
	$(BIN)/lahar bench preempt --nodes 5000 --pending 5000
	$(BIN)/lahar bench subgroups --pods 1000
	$(BIN)/lahar bench restart --nodes 5000 --pods 50000

# Every fault scenario on the whole system (about 15 minutes); `lahar chaos --fast` runs the few
# that `make test` also runs.
chaos: $(STAMP)
	$(BIN)/lahar chaos

fuzz: $(STAMP)
	LAHAR_FUZZ_EXAMPLES=10000 $(BIN)/python -m pytest tests/fuzz -q

clean:
	rm -rf $(VENV) build *.egg-info
