"""The findings pages and the README show numbers from the generated files, never typed ones."""
import json, re
from pathlib import Path
from dphpe.report.pages import write_readme

ROOT = Path(__file__).resolve().parents[1]
TWO_DECIMALS = re.compile(r'(?<![\d.])\d+\.\d{2}(?!\d)')  # 45.96, 0.20: a measured-looking number
SETTINGS = {'0.01'}  # C = 0.01 and AdamW's default weight decay: settings of the study, not measurements

def typed_numbers(text:str)->list: return [n for n in TWO_DECIMALS.findall(text) if n not in SETTINGS]


def markdown_cells(nb:Path)->list:
    return [''.join(c['source']) for c in json.loads(nb.read_text())['cells'] if c['cell_type'] == 'markdown']


def generated_numbers()->set:
    "Every number in the generated tables and summaries under figures/, to two decimals (the README may quote any of them)."
    seen = set()
    for p in (ROOT/'figures').rglob('*'):
        if p.suffix in ('.csv', '.md', '.json') and p.is_file():
            seen |= {f'{abs(float(m)):.2f}' for m in re.findall(r'-?\d+\.\d+', p.read_text(errors='ignore'))}
    return seen


def test_typed_numbers_are_found():
    "The check itself: a typed two-decimal number is caught, an integer or a setting like 1e-4 is not."
    assert typed_numbers('Feature-Projective DP leads by 4.95 points; lr 1e-4, 1,162 steps, ε 0.2, C = 0.01') == ['4.95']


def test_findings_pages_type_no_numbers():
    pages = sorted((ROOT/'nbs'/'findings').glob('*.ipynb'))
    assert len(pages) >= 5, f'expected at least five findings pages in nbs/findings, found {len(pages)}'
    for nb in pages:
        typed = [n for cell in markdown_cells(nb) for n in typed_numbers(cell)]
        assert not typed, f'{nb.name}: two-decimal numbers typed in markdown cells ({", ".join(typed[:5])}); render them from the generated files in a code cell'
        code = ''.join(''.join(c['source']) for c in json.loads(nb.read_text())['cells'] if c['cell_type'] == 'code')
        assert 'repo_figures' in code, f'{nb.name}: a findings page reads the generated files under figures/ (dphpe.report.pages.repo_figures)'


def test_readme_is_short_and_generated():
    text = (ROOT/'README.md').read_text()
    assert len(text) <= 10_000, f'README.md has {len(text):,} characters; keep it under 10,000 and move long material to the docs pages'
    assert write_readme(ROOT, check=True), 'README.md or nbs/index.ipynb is not what `make readme` writes from the generated gaps.csv: run `make readme`'


def test_readme_numbers_come_from_generated_files():
    known = generated_numbers()
    typed = [n for n in TWO_DECIMALS.findall((ROOT/'README.md').read_text()) if n not in known]
    assert not typed, f'README.md quotes numbers held by no generated file under figures/: {", ".join(typed[:5])}'


def test_readme_quotes_the_saved_plan_of_the_rest():
    "The README's cost of the strategies grid beyond its block is the saved plan's total (runs, hours rounded), not a number typed once (each block's own hours left are generated)."
    from dphpe.report.strategies import read_plan
    text = ' '.join((ROOT/'README.md').read_text().split())
    plan = read_plan((ROOT/'figures'/'strategies'/'rest-plan.txt').read_text())
    quoted = f"{plan['runs']} runs, about {plan['hours']:.0f} CPU-hours (`figures/strategies/rest-plan.txt`"
    assert quoted in text, f'README.md should quote the saved plan as "{quoted}": update the sentence in nbs/index.ipynb, then `make readme`'
