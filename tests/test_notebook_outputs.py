"""The committed notebooks' outputs, as a reader sees them on the docs site or on GitHub: no path of the machine that ran
them (checkout, virtual environment, temporary folders, home), no warning, and no figure shown twice."""
import json, re
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parent.parent
MACHINE_PATH = re.compile('|'.join([r'/root\b', r'/home/', r'/tmp/', r'/work/', r'/var/folders', r'site-packages', r'\.venv\b',
                                    re.escape(str(ROOT))]))
WARNING = re.compile(r'Warning:|warnings\.warn')
FIX = ("fix it where it is printed (ours: print a name or a relative path, fix the warning's cause; a dependency's warning: "
       "filter that one, see dphpe.quiet), then re-execute the notebook (papermill, then nbdev_clean, as `make outputs` does)")

def notebooks(root:Path=ROOT/'nbs')->list:
    "Every notebook under `root`, recursively (checkpoints left out)."
    return sorted(p for p in root.rglob('*.ipynb') if '.ipynb_checkpoints' not in p.parts)

def output_text(o:dict)->str:
    "The text a reader sees of one output: a stream, an error's traceback, or the text forms of a result or display."
    join = lambda v: ''.join(v) if isinstance(v, list) else str(v)
    if o.get('output_type') == 'stream': return join(o.get('text', ''))
    if o.get('output_type') == 'error': return '\n'.join([o.get('ename', ''), o.get('evalue', ''), *o.get('traceback', [])])
    return '\n'.join(join(v) for k, v in o.get('data', {}).items() if k.startswith('text/') or k.endswith('json'))

def problems(nb:Path)->list:
    "'cell I (id ID): what' for every output of notebook `nb` that names a machine path, carries a warning, or went to stderr."
    found = []
    for i, cell in enumerate(json.loads(nb.read_text())['cells']):
        for o in cell.get('outputs', []):
            text, where = output_text(o), f"cell {i} (id {cell.get('id')})"
            if m := MACHINE_PATH.search(text): what = f"a machine path ({text[max(0, m.start() - 30):m.end() + 30].strip()!r})"
            elif m := WARNING.search(text): what = f"a warning ({text[max(0, m.start() - 60):m.end() + 60].strip()!r})"
            elif o.get('name') == 'stderr': what = f"output on stderr ({text[:90].strip()!r})"
            else: continue
            if f"{where}: {what}" not in found: found.append(f"{where}: {what}")  # a warning printed by each of a cell's processes: once
        images = [str(o['data'][k]) for o in cell.get('outputs', []) for k in o.get('data', {}) if k.startswith('image/')]
        if len(images) > len(set(images)):  # a figure returned as the cell's value is shown again by the inline backend
            found.append(f"cell {i} (id {cell.get('id')}): the same image shown twice (end the cell with a statement, not the figure)")
    return found

def check(nb:Path):
    "Fail, in one line naming the notebook, each cell and the fix, if `nb`'s outputs have a problem."
    if found := problems(nb): pytest.fail(f"{nb.relative_to(ROOT) if nb.is_relative_to(ROOT) else nb}: {'; '.join(found)}; {FIX}", pytrace=False)

@pytest.mark.parametrize('nb', notebooks(), ids=lambda p: p.relative_to(ROOT/'nbs').as_posix())
def test_committed_outputs_name_no_machine_path_and_no_warning(nb): check(nb)

def test_the_check_finds_paths_warnings_and_stderr(tmp_path):
    "A notebook with each kind of problem, beside clean outputs: each problem is named with its cell, and nothing else."
    stream = lambda name, text: {'output_type': 'stream', 'name': name, 'text': text}
    png = lambda data: {'output_type': 'display_data', 'data': {'image/png': data, 'text/plain': ['<Figure>']}, 'metadata': {}}
    cells = [{'cell_type': 'code', 'id': 'clean', 'source': 'x', 'outputs': [stream('stdout', 'Resuming from run.pth: 1 of 2 epochs done.\n'),
              {'output_type': 'execute_result', 'data': {'text/plain': ["Path('HumanArt/images/b.jpg')"]}, 'metadata': {}}]},
             {'cell_type': 'code', 'id': 'warns', 'source': 'import fastai', 'outputs': [stream('stderr', [
                 'lib/torch/jit/_script.py:1491: FutureWarning: `torch.jit.script` is deprecated.\n', '  warnings.warn(\n'])]},
             {'cell_type': 'code', 'id': 'tmp', 'source': 'p', 'outputs': [
                 {'output_type': 'execute_result', 'data': {'text/plain': "Path('/tmp/tmpr0fccrvd/ha/b.jpg')"}, 'metadata': {}}]},
             {'cell_type': 'markdown', 'id': 'prose', 'source': 'Files go to /tmp/ and ~/.cache: prose is not an output.'},
             {'cell_type': 'code', 'id': 'venv', 'source': 'raise', 'outputs': [{'output_type': 'error', 'ename': 'ValueError', 'evalue': 'bad',
                 'traceback': [f'File {ROOT}/.venv/lib/python3.11/site-packages/x.py:3']}]},
             {'cell_type': 'code', 'id': 'log', 'source': 'log', 'outputs': [stream('stderr', 'measuring the step costs here\n')]},
             {'cell_type': 'code', 'id': 'twice', 'source': 'fig', 'outputs': [png('iVBORw0K'), png('iVBORw0K')]},
             {'cell_type': 'code', 'id': 'two', 'source': 'f; g', 'outputs': [png('iVBORw0K'), png('iVBORw1K')]}]
    for d in ('guides', '.ipynb_checkpoints'): (tmp_path/d).mkdir()
    nb = tmp_path/'guides'/'crafted.ipynb'  # a notebook in a folder of nbs/ is checked too; a checkpoint copy is not
    for f in (nb, tmp_path/'.ipynb_checkpoints'/'crafted-checkpoint.ipynb'):
        f.write_text(json.dumps({'cells': cells, 'metadata': {}, 'nbformat': 4, 'nbformat_minor': 5}))
    assert notebooks(tmp_path) == [nb]
    found = problems(nb)
    assert [f.split(':')[0] for f in found] == ['cell 1 (id warns)', 'cell 2 (id tmp)', 'cell 4 (id venv)', 'cell 5 (id log)', 'cell 6 (id twice)'], found
    assert 'a warning' in found[0] and 'a machine path' in found[1] and 'a machine path' in found[2] and 'output on stderr' in found[3], found
    assert 'the same image shown twice' in found[4], found  # two different figures in one cell (id two) are fine
    with pytest.raises(pytest.fail.Exception, match=r"crafted.ipynb: cell 1 \(id warns\): a warning .*; cell 5 .*re-execute the notebook"): check(nb)
    nb.write_text(json.dumps({'cells': cells[:1] + cells[3:4], 'metadata': {}, 'nbformat': 4, 'nbformat_minor': 5}))
    check(nb)  # clean outputs and prose pass
