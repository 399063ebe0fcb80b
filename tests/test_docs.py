"""The docs site as nbdev hands it to Quarto (`_proc/`, made by `.ci/docs-proc`, which `make docs-check` runs): every
relative link and image resolves inside `_proc/`, the hand-written sidebar and the navbar name pages that exist, and
every page is in the sidebar."""
import json, os, re, subprocess, sys
from configparser import ConfigParser
from pathlib import Path
from urllib.parse import unquote
import pytest, yaml

ROOT = Path(__file__).resolve().parents[1]
PAGE_SUFFIXES = ('.ipynb', '.qmd', '.md')  # what Quarto renders to .html

def doc_sources(root:Path)->list:
    "The files nbdev's docs step reads: nbs/ less the `_`/`.` folders and files it skips, the root `_quarto.yml` and settings.ini."
    nbs = root/'nbs'
    skip = lambda p: any(part.startswith(('_', '.')) for part in p.relative_to(nbs).parts)
    return [p for p in nbs.rglob('*') if p.is_file() and not skip(p)] + [root/'_quarto.yml', root/'settings.ini']

def proc_is_stale(root:Path)->bool:
    "Whether `_proc/` is missing or older than a file it is made from (the docs step touches `_proc/` when it ends)."
    proc = root/'_proc'
    if not (proc/'_quarto.yml').is_file(): return True
    return max(p.stat().st_mtime for p in doc_sources(root)) > proc.stat().st_mtime

# --- the links of a page -------------------------------------------------------------------------------------------
CODE = re.compile(r'^ {0,3}(```|~~~).*?^ {0,3}\1[^\n]*$|`+[^`\n]*`+|\$\$.*?\$\$|<!--.*?-->', re.S | re.M)  # code, display math, comments
INLINE = re.compile(r'!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|(?:[^()\s]|\([^()\s]*\))*)(?:\s+(?:"[^"]*"|\'[^\']*\'|\([^)]*\)))?\s*\)')
REFDEF = re.compile(r'^ {0,3}\[[^\]]+\]:\s*(\S+)', re.M)
HTML = re.compile(r'<(?:img|a|source)\b[^>]*?\b(?:src|href)\s*=\s*["\']([^"\']*)["\']', re.I)

def markdown_targets(text:str)->list:
    "The targets of the inline links and images, reference definitions and HTML `src`/`href` of markdown `text`, outside code."
    text = CODE.sub('', text)
    return [t.strip('<>') for rx in (INLINE, REFDEF, HTML) for t in rx.findall(text)]

def page_texts(page:Path)->list:
    "The markdown of a page: a notebook's markdown cells and markdown outputs, or a .qmd/.md file."
    if page.suffix != '.ipynb': return [page.read_text()]
    cells = json.loads(page.read_text())['cells']
    src = lambda s: ''.join(s) if isinstance(s, list) else s
    return ([src(c['source']) for c in cells if c['cell_type'] == 'markdown'] +
            [src(o['data']['text/markdown']) for c in cells for o in c.get('outputs', []) if 'text/markdown' in o.get('data', {})])

SCHEME = re.compile(r'^[A-Za-z][A-Za-z0-9+.-]*:')  # http:, https:, mailto:, …: not checked here

def resolves(target:str, page:Path, proc:Path)->bool:
    "Whether a link of `page` lands on a file or folder inside `proc` (x.html: x.ipynb, x.qmd or x.md, which render to it)."
    if SCHEME.match(target) or target.startswith('#'): return True
    rel = unquote(re.split(r'[#?]', target, 1)[0])
    if not rel: return True
    p = ((proc if rel.startswith('/') else page.parent)/rel.lstrip('/')).resolve()
    if not p.is_relative_to(proc.resolve()): return False  # outside the processed tree: Quarto never sees it
    return p.exists() or (p.suffix == '.html' and any(p.with_suffix(s).exists() for s in PAGE_SUFFIXES))

def pages(proc:Path)->list:
    "Every page of the processed tree."
    return sorted(p for s in PAGE_SUFFIXES for p in proc.rglob(f'*{s}') if not p.name.startswith(('_', '.')))

def broken_links(proc:Path)->list:
    "'page: target' for every relative link or image of the pages of `proc` that does not resolve."
    return [f"{page.relative_to(proc)}: {t}" for page in pages(proc) for text in page_texts(page)
            for t in markdown_targets(text) if not resolves(t, page, proc)]

# --- the sidebar and the navbar ------------------------------------------------------------------------------------
def nav_entries(item)->list:
    "The paths and hrefs of a sidebar's or navbar's items, nested sections and menus included."
    if isinstance(item, str): return [item]
    if isinstance(item, list): return [e for i in item for e in nav_entries(i)]
    if isinstance(item, dict):
        return ([item[k] for k in ('href', 'file') if isinstance(item.get(k), str)] +
                [e for k in ('contents', 'menu', 'left', 'right') for e in nav_entries(item.get(k, []))])
    return []

def sidebar_entries(proc:Path)->list:
    "The entries of the sidebar(s) of `proc/sidebar.yml`."
    side = yaml.safe_load((proc/'sidebar.yml').read_text())['website']['sidebar']
    return [e for s in (side if isinstance(side, list) else [side]) for e in nav_entries(s.get('contents', []))]

def navbar_entries(proc:Path)->list:
    "The entries of the navbar of `proc/_quarto.yml`."
    return nav_entries(yaml.safe_load((proc/'_quarto.yml').read_text())['website'].get('navbar', {}))

def missing_entries(entries:list, proc:Path)->list:
    "The entries (paths from the site's root) that name no file of `proc`; 'auto' and web addresses pass, a glob must match."
    def found(e):
        if e == 'auto' or SCHEME.match(e): return True
        if '*' in e: return any(proc.glob(e.lstrip('/')))
        return resolves(e, proc/'index', proc)
    return [e for e in entries if not found(e)]

def pages_not_in_sidebar(proc:Path)->list:
    "The pages of `proc` that no sidebar entry names (a reader could reach them by search only)."
    listed = {Path(e.lstrip('/')).with_suffix('') for e in sidebar_entries(proc)}
    return [str(p.relative_to(proc)) for p in pages(proc) if p.relative_to(proc).with_suffix('') not in listed]

# --- the site of this checkout ---------------------------------------------------------------------------------------
@pytest.fixture(scope='module')
def proc()->Path:
    "`_proc/`, made again by `.ci/docs-proc` (as `make docs-check` does) where it is missing or stale."
    if proc_is_stale(ROOT):
        r = subprocess.run([sys.executable, str(ROOT/'.ci'/'docs-proc')], cwd=ROOT, capture_output=True, text=True)
        assert r.returncode == 0, f".ci/docs-proc failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return ROOT/'_proc'

def test_links_and_images_resolve(proc):
    bad = broken_links(proc)
    assert not bad, "links or images that do not resolve in _proc/ (page: target):\n  " + '\n  '.join(bad)

def test_sidebar_names_existing_pages(proc):
    assert not (bad := missing_entries(sidebar_entries(proc), proc)), f"nbs/sidebar.yml names pages that do not exist: {bad}"

def test_every_page_is_in_the_sidebar(proc):
    assert not (bad := pages_not_in_sidebar(proc)), f"pages no entry of nbs/sidebar.yml names: {bad}"

def test_navbar(proc):
    assert not (bad := missing_entries(navbar_entries(proc), proc)), f"the navbar of _quarto.yml names pages that do not exist: {bad}"
    cfg = ConfigParser()
    cfg.read(ROOT/'settings.ini')
    assert cfg['DEFAULT']['git_url'] in navbar_entries(proc), "the navbar links to the repository of settings.ini's git_url"

def test_sidebar_is_hand_written(proc):
    "custom_sidebar keeps nbdev from regenerating the sidebar: the processed one is nbs/sidebar.yml as written."
    cfg = ConfigParser()
    cfg.read(ROOT/'settings.ini')
    assert cfg['DEFAULT'].getboolean('custom_sidebar')
    assert (proc/'sidebar.yml').read_bytes() == (ROOT/'nbs'/'sidebar.yml').read_bytes()

# --- the checks themselves, on a crafted tree ------------------------------------------------------------------------
def _nb(*markdown:str, outputs:tuple=())->str:
    cells = [{'cell_type': 'markdown', 'metadata': {}, 'source': m} for m in markdown]
    cells.append({'cell_type': 'code', 'metadata': {}, 'source': '', 'execution_count': 1,
                  'outputs': [{'output_type': 'display_data', 'metadata': {}, 'data': {'text/markdown': o}} for o in outputs]})
    return json.dumps({'cells': cells, 'metadata': {}, 'nbformat': 4, 'nbformat_minor': 5})

def test_checks_catch_what_is_broken(tmp_path):
    proc = tmp_path/'_proc'
    (proc/'guides').mkdir(parents=True)
    (tmp_path/'figures').mkdir()
    (tmp_path/'figures'/'x.png').write_bytes(b'png')  # exists, but outside _proc/
    (proc/'img.png').write_bytes(b'png')
    (proc/'index.ipynb').write_text(_nb(
        "# Home\n![ok](img.png) [ok](guides/a.ipynb) [ok, rendered](guides/a.html#top) [web](https://example.org/x) [anchor](#a)",
        "![root path](figures/x.png) [gone](guides/nosuch.ipynb) <img src=\"nosuch.png\">",
        "```sh\n[not a link](inside/code.md)\n```\n`[nor](this.md)`"))
    (proc/'guides'/'a.ipynb').write_text(_nb("[up](../index.ipynb?x=1) ![escapes](../../figures/x.png)",
                                              outputs=("[from code](../findings/nosuch.ipynb)",)))
    (proc/'notes.qmd').write_text("[ok](/index.ipynb) [bad](missing.qmd)\n\n[ref]: gone.md\n")
    (proc/'orphan.ipynb').write_text(_nb("# Orphan"))
    (proc/'sidebar.yml').write_text(yaml.safe_dump({'website': {'sidebar': {'contents': [
        'index.ipynb', {'section': 'Guides', 'contents': ['guides/a.ipynb', 'guides/nosuch.ipynb']}, 'notes.qmd']}}}))
    (proc/'_quarto.yml').write_text(yaml.safe_dump({'website': {'navbar': {
        'left': [{'text': 'Guides', 'menu': ['guides/a.ipynb', 'guides/b.ipynb']}], 'right': [{'href': 'https://github.com/x/y'}]}}}))
    assert broken_links(proc) == ['guides/a.ipynb: ../../figures/x.png', 'guides/a.ipynb: ../findings/nosuch.ipynb',
                                  'index.ipynb: figures/x.png', 'index.ipynb: guides/nosuch.ipynb', 'index.ipynb: nosuch.png',
                                  'notes.qmd: missing.qmd', 'notes.qmd: gone.md']
    assert missing_entries(sidebar_entries(proc), proc) == ['guides/nosuch.ipynb']
    assert missing_entries(navbar_entries(proc), proc) == ['guides/b.ipynb']
    assert pages_not_in_sidebar(proc) == ['orphan.ipynb']

def test_stale_proc(tmp_path):
    (tmp_path/'nbs').mkdir()
    (tmp_path/'_proc').mkdir()
    for f in ('_quarto.yml', 'settings.ini', 'nbs/a.ipynb'): (tmp_path/f).write_text('')
    assert proc_is_stale(tmp_path)  # no _proc/_quarto.yml
    (tmp_path/'_proc'/'_quarto.yml').write_text('')
    old = (tmp_path/'_proc').stat().st_mtime - 10
    for f in ('_quarto.yml', 'settings.ini', 'nbs/a.ipynb'): os.utime(tmp_path/f, (old, old))
    assert not proc_is_stale(tmp_path)
    (tmp_path/'nbs'/'a.ipynb').write_text('{}')
    os.utime(tmp_path/'nbs'/'a.ipynb', (old + 20, old + 20))
    assert proc_is_stale(tmp_path)
