"""Every kept record's provenance is the generated `figures/provenance.csv`, and no record of a method under test was made
before its preset's `Pre-register:` commit (its non-private and DP-SGD calibration runs may be)."""
import subprocess, warnings
from pathlib import Path
import pandas as pd
import pytest
from dphpe.presets import STUDY_PRESETS
from dphpe.report.provenance import ORDERS, provenance

ROOT = Path(__file__).resolve().parents[1]
FROZEN = sorted({p.preregistered for p in STUDY_PRESETS.values() if p.preregistered})


def history_lacks()->list:
    "The Pre-register commits this checkout's git history does not hold (a shallow clone, or no git at all)."
    return [c for c in FROZEN if subprocess.run(['git', '-C', str(ROOT), 'cat-file', '-e', f'{c}^{{commit}}'], capture_output=True).returncode != 0]


@pytest.fixture(scope='module')
def table():
    if lacks := history_lacks(): pytest.skip(f"this checkout's git history lacks the Pre-register commits {lacks} (a shallow clone?): clone it whole")
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        return provenance(ROOT/'figures')


def test_no_method_under_test_precedes_its_preregistration(table):
    broken = table[table.order == ORDERS['broken']]
    assert broken.empty, f"records of methods under test made before their preset's Pre-register commit:\n{broken.to_string()}"
    assert (table.order == ORDERS['after']).sum() > 0  # the check read the history: some records are placed after their freeze


def test_committed_provenance_is_what_the_records_give(table):
    committed = pd.read_csv(ROOT/'figures'/'provenance.csv', skiprows=1, keep_default_na=False, dtype=str)
    ours = table.astype(str)
    assert committed.equals(ours), 'figures/provenance.csv is behind the records: run `make reports` (or write_provenance())'
