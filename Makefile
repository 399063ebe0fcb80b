# dphpe: two entry points do everything on a fresh machine (Python 3.11):
#   make study   -> create .venv, install the pinned set, run the embedded study (quick preset)
#   make test    -> create .venv, install the pinned set, run nbdev_test over nbs/ and pytest over tests/
PYTHON ?= python3.11
VENV   ?= .venv
BIN     = $(VENV)/bin
PRESET ?= quick
STALE  ?= refuse
STAMP   = $(VENV)/.dphpe-installed

.PHONY: setup study lint test test-slow test-slurm export docs-check clean-docs readme outputs lab hypotheses

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

# JupyterLab on the notebooks (nbs/), from the pinned environment; it prints the URL (with its token) to open. As root
# (containers often are) it needs --allow-root.
lab: setup
	$(BIN)/jupyter lab --notebook-dir=nbs $(if $(filter 0,$(shell id -u)),--allow-root)

# Docs: Quarto cannot be installed on the development machines; this checks the processing step nbdev
# runs before Quarto (the GitHub Actions workflow builds and publishes the site where Quarto exists).
# .ci/docs-proc is that step (nbs/ -> _proc/; it keeps the hand-written nbs/sidebar.yml); tests/test_docs.py then
# checks that every relative link and image of _proc/ resolves inside _proc/ and that the sidebar names pages that
# exist. Only nbs/ reaches _proc/: a page shows a file of figures/ as a code cell's output (read in code), and links
# to other repository files by their GitHub address.
docs-check: setup
	$(BIN)/python .ci/docs-proc

clean-docs:
	rm -rf _proc _docs

# README.md is rendered from nbs/index.ipynb's markdown cells, after its generated blocks (between their markers) are
# filled: the results from a report's gaps.csv (dphpe.report.pages.README_PRESET), the pre-registered blocks from their
# progress.csv and verdicts.csv (README_BLOCKS); tests/test_findings.py fails when README.md is not what this writes.
readme: setup
	$(BIN)/python -c "from dphpe.report.pages import write_readme; write_readme()"

# Execute every notebook in place so the committed notebooks (and the docs site) show their outputs; each runs in its
# own folder (the pages in nbs/findings/, nbs/guides/, nbs/explanations/ read ../../figures/).
outputs: setup
	for nb in nbs/[0-9]*.ipynb nbs/index.ipynb nbs/*/*.ipynb; do $(BIN)/papermill --cwd "$$(dirname "$$nb")" -k python3 --no-progress-bar "$$nb" "$$nb" || exit 1; done
	$(BIN)/nbdev_clean

# Rebuild the blocks' reports from their committed records (figures/<block>/records: no runs needed) and the records'
# provenance (figures/provenance.csv), then the findings pages that show them (03 full grid, 08 strategies, 09 Human-Art,
# 10 provenance) and the README's table of the blocks. Run it with every record committed: tests/test_reports.py and
# tests/test_provenance.py fail, naming these commands, while a report is not what its records write. --no-regime: each
# block's regime card was measured once, on the machine that made its public model, and is kept as it is.
REPORT = $(BIN)/dphpe report --no-regime
BLOCK_PAGES = nbs/findings/03_full_grid.ipynb nbs/findings/08_strategies.ipynb nbs/findings/09_humanart.ipynb nbs/findings/10_provenance.ipynb
reports: export OMP_NUM_THREADS = 1  # beside the CPU queues, which hold a core each
reports: setup
	$(REPORT) --runs figures/strategies/records --out figures/strategies --plan strategies
	$(REPORT) --runs figures/strategies/records --kept figures/full/finetune-grid --out figures/full
	$(REPORT) --runs figures/humanart/records --out figures/humanart --plan humanart
	$(BIN)/python -c "from dphpe.report.provenance import write_provenance; write_provenance()"
	for nb in $(BLOCK_PAGES); do $(BIN)/papermill --cwd nbs/findings -k python3 --no-progress-bar "$$nb" "$$nb" || exit 1; done
	$(BIN)/nbdev_clean
	$(BIN)/python -c "from dphpe.report.pages import write_readme; write_readme()"

# The pre-registered C = 1 hypotheses (figures/hypotheses/plan.md), in the plan's order: seed 0 of every block (H3c at
# the rate chosen on H3b, 071f46d), then seeds 1 and 2 of the defaults and of H2, and of H3c and DP-SGD under SGD.
# Hours on a CPU; resumable (finished runs are kept in figures/hypotheses/records and skipped). Records made by earlier
# code are kept (--stale keep): since the plan the code changed where it reads checkpoints, in H3's chosen rate, and in
# what these runs leave off (the Human-Art preset, padded batches). The seeds H1/H5 call for come after, by the plan.
HYP = dphpe sweep --preset hypotheses --jobs 2 --runs runs/hypotheses --records figures/hypotheses/records --stale keep
hypotheses: setup
	$(BIN)/$(HYP) --where seed=0
	$(BIN)/$(HYP) --where seed=1,2 head_init=loaded score_on=valid optimizer=adamw lr=0.001
	$(BIN)/$(HYP) --where seed=1,2 optimizer=sgd score_on=valid method=dpsgd,projection,feature_projection

