"""The committed reports that rebuild from committed files are what the report writes from them today: the `full`
report from its kept `finetune` grid and the strategies block's records, and the blocks' reports from their records.
A table edited by hand, or a report not rebuilt after a record landed, fails here with the command that rebuilds it
(`make reports` runs them all, and re-renders the pages that show them)."""
import warnings
from pathlib import Path
import pytest
from dphpe.report.kept import write_kept_report
from dphpe.report.write import write_report

ROOT = Path(__file__).resolve().parents[1]
REBUILT = {  # report folder: (its runs' records, the kept report or None, the command that rebuilds it)
    'figures/full': ('figures/strategies/records', 'figures/full/finetune-grid',
                     'dphpe report --runs figures/strategies/records --kept figures/full/finetune-grid --out figures/full --no-regime'),
    'figures/strategies': ('figures/strategies/records', None,
                           'dphpe report --runs figures/strategies/records --out figures/strategies --no-regime --plan strategies'),
    'figures/humanart': ('figures/humanart/records', None,
                         'dphpe report --runs figures/humanart/records --out figures/humanart --no-regime --plan humanart')}


def tables(folder:Path)->dict:
    "{name: text} of a report's tables (`.csv`, `.md`) and summary: what the report writes from numbers alone."
    return {p.name: p.read_text() for p in sorted(folder.glob('*')) if p.suffix in ('.csv', '.md') and p.stem.startswith(('table', 'mpii_', 'humanart_', 'summary'))}


@pytest.mark.parametrize('report', sorted(REBUILT))
def test_committed_report_is_what_the_report_writes(report, tmp_path, monkeypatch):
    records, kept, command = REBUILT[report]
    monkeypatch.chdir(ROOT)  # the folders as the command names them: relative, as the captions and READMEs print them
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        if kept: write_kept_report(Path(records), Path(kept), tmp_path)
        else: write_report(Path(records), tmp_path)
    ours, committed = tables(tmp_path), tables(ROOT/report)
    assert ours, f'{report}: nothing written from {records}'
    assert set(ours) <= set(committed), f'{report} lacks {sorted(set(ours) - set(committed))}: rebuild it with `{command}`'
    stale = [n for n in ours if ours[n] != committed[n]]
    assert not stale, f'{report}: {", ".join(stale)} differ from what the report writes from {records}: rebuild it with `{command}`'


PLANNED = {'figures/strategies': 'strategies', 'figures/humanart': 'humanart'}  # the blocks whose report also decides a plan (`--plan`)


@pytest.mark.parametrize('report', sorted(PLANNED))
def test_committed_verdicts_and_progress_are_what_the_plan_writes(report, tmp_path, monkeypatch):
    "A block's `verdicts.csv` and `progress.csv` (which the README's table of the blocks reads) are what `--plan` writes from its records."
    from dphpe.cli import plan_writers
    from dphpe.report.collect import collect_runs
    records, _, command = REBUILT[report]
    monkeypatch.chdir(ROOT)
    (tmp_path/'rest-plan.txt').write_text((ROOT/report/'rest-plan.txt').read_text())  # what prices the unfinished runs
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        df = collect_runs(Path(records))
        for w in plan_writers(PLANNED[report], Path(records)):
            if getattr(w, 'func', w).__name__ in ('write_verdicts', 'write_progress'): w(df, tmp_path)
    stale = [n for n in ('verdicts.csv', 'progress.csv') if (tmp_path/n).read_text() != (ROOT/report/n).read_text()]
    assert not stale, f'{report}: {", ".join(stale)} differ from what the plan writes from {records}: rebuild it with `{command}` (or `make reports`)'
