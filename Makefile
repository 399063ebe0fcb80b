# dphpe: two entry points do everything on a fresh machine (Python 3.11):
#   make study   -> create .venv, install the pinned set, run the embedded study (quick preset)
#   make test    -> create .venv, install the pinned set, run nbdev_test over nbs/ and pytest over tests/
PYTHON ?= python3.11
VENV   ?= .venv
BIN     = $(VENV)/bin
PRESET ?= quick
STALE  ?= refuse
STAMP   = $(VENV)/.dphpe-installed

.PHONY: setup study lint test test-slow test-slurm export docs-check clean-docs readme outputs

$(STAMP): settings.ini setup.py constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --constraint constraints.txt --editable ".[dev]"
	touch $(STAMP)

setup: $(STAMP)

study: setup
	$(BIN)/dphpe study --preset $(PRESET) --stale $(STALE)

# pyflakes over the package (the notebooks' exported code) and the tests: unused or undefined names fail the test run.
lint: setup
	$(BIN)/python -m pyflakes dphpe tests

# nbdev_test and pytest (pytest-xdist, one test file per worker) run TEST_WORKERS at once, and each worker's torch gets
# an equal share of the cores: on the 2-core CI machine one thread each (two kernels of two threads on two cores spent
# 6x the wall time: 06_train + 07_pretrain 118-126 s against 21 s, measured here).
TEST_WORKERS ?= 2
TEST_THREADS ?= $(shell n=$$(( $$(nproc) / $(TEST_WORKERS) )); echo $$(( n > 0 ? n : 1 )))
test test-slow: export OMP_NUM_THREADS = $(TEST_THREADS)

test: setup lint docs-check
	$(BIN)/nbdev_test --n_workers $(TEST_WORKERS) --timing
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --durations=8 tests

test-slow: setup
	$(BIN)/nbdev_test --n_workers $(TEST_WORKERS) --flags slow --timing

# The `slurm` tests against a real single-node Slurm (Debian's packages, started as root by .ci/slurm-up); `make test`
# runs them too, and skips them with the reason where no Slurm answers.
test-slurm: setup
	.ci/slurm-up
	$(BIN)/python -m pytest -q -rs -m slurm tests

export: setup
	$(BIN)/nbdev_export

# Docs: Quarto cannot be installed on the development machines; this checks the processing step nbdev
# runs before Quarto (the GitHub Actions workflow builds and publishes the site where Quarto exists).
docs-check: setup
	$(BIN)/python -c "from nbdev.quarto import refresh_quarto_yml, nbdev_sidebar; from nbdev.serve import proc_nbs; import nbdev.doclinks as d; refresh_quarto_yml(); d._build_modidx(); nbdev_sidebar.__wrapped__(); proc_nbs(force=True)"
	test -f _proc/_quarto.yml && test -f _proc/index.ipynb && echo "docs processing OK: $$(ls _proc/*.ipynb | wc -l) notebooks in _proc/"

clean-docs:
	rm -rf _proc _docs

# README.md is rendered from nbs/index.ipynb (nbdev_readme does the same through Quarto where it exists).
readme: setup
	$(BIN)/python -c "import json; nb=json.load(open('nbs/index.ipynb')); open('README.md','w').write('\n\n'.join(''.join(c['source']) for c in nb['cells'] if c['cell_type']=='markdown')+'\n')"

# Execute every notebook in place so the committed notebooks (and the docs site) show their outputs.
outputs: setup
	for nb in nbs/[0-9]*.ipynb nbs/index.ipynb; do $(BIN)/papermill --cwd nbs -k python3 --no-progress-bar "$$nb" "$$nb" || exit 1; done
	$(BIN)/nbdev_clean
