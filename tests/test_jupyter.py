"""JupyterLab as `make lab` starts it: a server on nbs/ that lists the notebooks and runs one through a kernel it started.

The server listens on a free local port with a token; its runtime, config, data and IPython folders are temporary, and the
server, with its kernels, is stopped at the end (its process group is killed if it does not stop)."""
import json, os, signal, socket, subprocess, sys, time, uuid, urllib.request
from pathlib import Path
import pytest
import websocket  # websocket-client, a dependency of jupyter_server

ROOT = Path(__file__).resolve().parent.parent
JUPYTER = Path(sys.executable).parent/'jupyter'
SMALL = '00_joints.ipynb'  # the notebook run through the kernel: numpy and matplotlib only, a few seconds

def free_port()->int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]

class Server:
    "A JupyterLab server's address and token, and its REST API."
    def __init__(self, port:int, token:str, proc:subprocess.Popen, log:Path): self.port, self.token, self.proc, self.log = port, token, proc, log
    def api(self, path:str, method:str='GET', body:dict=None):
        req = urllib.request.Request(f'http://127.0.0.1:{self.port}{path}', method=method, headers={'Authorization': f'token {self.token}'},
                                     data=None if body is None else json.dumps(body).encode())
        with urllib.request.urlopen(req, timeout=60) as r: return r.status, (json.loads(r.read() or b'null') if 'json' in r.headers.get('Content-Type', '') else r.read())

def start(tmp:Path, timeout:float=180)->Server:
    "Start `jupyter lab` on nbs/ as `make lab` does, headless, on a free local port with a token; wait until its API answers."
    port, token, log = free_port(), uuid.uuid4().hex, tmp/'server.log'
    env = {**os.environ, 'JUPYTER_RUNTIME_DIR': str(tmp/'runtime'), 'JUPYTER_CONFIG_DIR': str(tmp/'config'), 'JUPYTER_DATA_DIR': str(tmp/'data'),
           'IPYTHONDIR': str(tmp/'ipython'), 'OMP_NUM_THREADS': os.environ.get('OMP_NUM_THREADS', '1')}
    with open(log, 'w') as out:
        proc = subprocess.Popen([str(JUPYTER), 'lab', '--no-browser', '--notebook-dir=nbs', '--ip=127.0.0.1', f'--port={port}',
                                 '--ServerApp.port_retries=0', f'--IdentityProvider.token={token}', *(['--allow-root'] if os.geteuid() == 0 else [])],
                                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    server, t0 = Server(port, token, proc, log), time.time()
    while time.time() - t0 < timeout:
        if proc.poll() is not None: pytest.fail(f"jupyter lab exited with code {proc.returncode} before answering; its log: {log.read_text()[-2000:]}")
        try:
            if server.api('/api/status')[0] == 200: return server
        except OSError: time.sleep(0.5)
    stop(server)
    pytest.fail(f"jupyter lab did not answer on port {port} within {timeout:.0f} s; its log: {log.read_text()[-2000:]}")

def stop(server:Server):
    "Shut the server down through its API (it stops its kernels); kill its process group if it has not exited after 30 s."
    try: server.api('/api/shutdown', 'POST')
    except OSError: pass
    try: server.proc.wait(30)
    except subprocess.TimeoutExpired: pass
    try: os.killpg(server.proc.pid, signal.SIGKILL)  # the server's session: any kernel left behind goes with it
    except ProcessLookupError: pass
    server.proc.wait()

@pytest.fixture(scope='module')
def lab(tmp_path_factory):
    server = start(tmp_path_factory.mktemp('jupyter'))
    yield server
    stop(server)

def test_lab_lists_the_notebooks(lab):
    status, listing = lab.api('/api/contents?content=1')
    assert status == 200 and listing['type'] == 'directory'
    listed = {e['name'] for e in listing['content'] if e['type'] == 'notebook'}
    missing = sorted({p.name for p in (ROOT/'nbs').glob('*.ipynb')} - listed)
    assert not missing, f"the server on nbs/ does not list {missing}; see {lab.log}"
    assert lab.api('/lab')[0] == 200  # the JupyterLab page itself

def execute(ws, session:str, code:str, timeout:float=300)->dict:
    "Run `code` on the kernel behind websocket `ws`; return its reply content, with 'outputs' (iopub results, streams, errors) added."
    msg_id = uuid.uuid4().hex
    ws.send(json.dumps({'header': {'msg_id': msg_id, 'session': session, 'username': 'test', 'msg_type': 'execute_request', 'version': '5.3'},
                        'parent_header': {}, 'metadata': {}, 'channel': 'shell', 'buffers': [],
                        'content': {'code': code, 'silent': False, 'store_history': True, 'user_expressions': {}, 'allow_stdin': False,
                                    'stop_on_error': True}}))
    reply, outputs, idle, t0 = None, [], False, time.time()
    while not (reply and idle):
        if time.time() - t0 > timeout: raise TimeoutError(f"no reply within {timeout:.0f} s to: {code[:80]!r}")
        m = json.loads(ws.recv())
        if m['parent_header'].get('msg_id') != msg_id: continue
        kind = m['header']['msg_type']
        if kind == 'execute_reply': reply = m['content']
        elif kind == 'status': idle = m['content']['execution_state'] == 'idle'
        elif kind in ('stream', 'execute_result', 'display_data', 'error'): outputs.append((kind, m['content']))
    return {**reply, 'outputs': outputs}

def test_lab_runs_a_notebook_through_its_kernel(lab):
    status, sess = lab.api('/api/sessions', 'POST', {'path': SMALL, 'type': 'notebook', 'name': SMALL, 'kernel': {'name': 'python3'}})
    assert status == 201, sess
    kernel = sess['kernel']['id']
    ws = websocket.create_connection(f'ws://127.0.0.1:{lab.port}/api/kernels/{kernel}/channels?session_id={uuid.uuid4().hex}',
                                     header=[f'Authorization: token {lab.token}'], timeout=300)
    try:
        widgets = execute(ws, sess['id'], 'import warnings\nwith warnings.catch_warnings():\n    warnings.simplefilter("error")\n'
                                          '    import jupyterlab, ipywidgets, tqdm.auto  # no TqdmWarning: progress bars are widgets')
        assert widgets['status'] == 'ok', f"{widgets.get('ename')}: {widgets.get('evalue')}: install the pinned set (make setup)"
        where = execute(ws, sess['id'], 'import os, sys; print(os.getcwd()); print(sys.prefix)')
        assert where['status'] == 'ok' and where['outputs'][0][1]['text'].split('\n')[:2] == [str(ROOT/'nbs'), sys.prefix], where  # on nbs/, in this environment
        cells, results = [c for c in json.loads((ROOT/'nbs'/SMALL).read_text())['cells'] if c['cell_type'] == 'code'], 0
        for i, c in enumerate(cells):
            r = execute(ws, sess['id'], ''.join(c['source']))
            assert r['status'] == 'ok', f"{SMALL}, code cell {i}: {r.get('ename')}: {r.get('evalue')}"
            results += sum(kind in ('execute_result', 'display_data') for kind, _ in r['outputs'])
        assert results, f"{SMALL} ran through the kernel but showed nothing"
    finally:
        ws.close()
        lab.api(f"/api/sessions/{sess['id']}", 'DELETE')
    assert kernel not in {k['id'] for k in lab.api('/api/kernels')[1]}  # the kernel stopped with its session
