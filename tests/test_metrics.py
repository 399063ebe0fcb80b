"Tests of dphpe.metrics: the MPII PCKh protocol, hand-computed cases, an independent loop, the file formats and errors."
import json, math
from pathlib import Path
import numpy as np
import pytest
from scipy.io import loadmat, savemat
from dphpe.metrics import (HRNET_MEAN01_THR, MPII_GROUPS, PCKH_COLUMNS, evaluate_pckh, evaluate_pckh_files,
                           from_gt_mat, head_size, load_gt_mat, load_preds, pck, pckh, pckh_groups, pckh_markdown,
                           pckh_table, save_preds_mat, weighted_mean)

FIXTURES = Path(__file__).parents[1]/'..'/'shared'/'fixtures'
KEYS = ['Head', 'Shoulder', 'Elbow', 'Wrist', 'Hip', 'Knee', 'Ankle', 'Mean', 'Mean@0.1']
MAT_NAMES = np.array([['rank', 'rkne', 'rhip', 'lhip', 'lkne', 'lank', 'pelv', 'thrx', 'neck', 'head',
                       'rwri', 'relb', 'rsho', 'lsho', 'lelb', 'lwri']], dtype=object)
R_ANK, L_ANK, PELVIS, THORAX, NECK, HEAD, R_WRI, L_WRI, R_SHO = 0, 5, 6, 7, 8, 9, 10, 15, 12


def two_persons():
    "Person 0: head box 30×40 (head size 30); person 1: head box 6×8 (head size 6). Both perfect; 16 joints visible."
    gt = np.stack([np.arange(32, dtype=float).reshape(16, 2) * 7 + 50] * 2)
    hb = np.array([[[10, 20], [40, 60]], [[0, 0], [6, 8]]], float)
    return gt.copy(), gt, np.ones((2, 16)), hb


# ---------------------------------------------------------------- hand-computed cases

def test_head_size_is_0_6_diagonal():
    np.testing.assert_array_equal(head_size([[[10, 20], [40, 60]], [[0, 0], [6, 8]]]), [30., 6.])


@pytest.mark.parametrize('off, ok', [((9., 12.), True),          # 15 = 0.5 × 30 exactly: ≤ counts
                                     ((15.000001, 0.), False),   # just above
                                     ((14.99, 0.), True)])       # just below
def test_threshold_boundary_is_inclusive(off, ok):
    pred, gt, vis, hb = two_persons()
    pred[0, R_ANK] += off
    rates, counts = pckh(pred, gt, vis, hb)
    assert rates[R_ANK] == (100. if ok else 50.) and counts[R_ANK] == 2


def test_boundary_scales_with_each_persons_head():
    pred, gt, vis, hb = two_persons()
    pred[:, R_ANK] += [4., 0.]  # 4/30 fine for person 0, 4/6 > 0.5 for person 1
    assert pckh(pred, gt, vis, hb)[0][R_ANK] == 50.
    assert pckh(pred, gt, vis, hb, thr=0.7)[0][R_ANK] == 100.


def test_invisible_joints_excluded_from_counts_and_rates():
    pred, gt, vis, hb = two_persons()
    pred[1, L_WRI] += 100
    vis[1, L_WRI] = 0  # wildly wrong but not annotated
    pred[1, R_WRI] += 100                     # wrong and annotated
    rates, counts = pckh(pred, gt, vis, hb)
    assert counts[L_WRI] == 1 and rates[L_WRI] == 100.
    assert counts[R_WRI] == 2 and rates[R_WRI] == 50.
    ok, nerr = pck(pred, gt, vis, head_size(hb))
    assert not ok[1, L_WRI] and math.isnan(nerr[1, L_WRI])


def test_group_is_mean_of_two_rates_not_pooled():
    pred, gt, vis, hb = two_persons()
    gt, pred, vis, hb = (np.concatenate([a, a[:1]]) for a in (gt, pred, vis, hb))  # a third person like person 0
    vis[1, L_WRI] = vis[2, L_WRI] = 0                 # l_wrist visible once (correct)
    pred[1:, R_WRI] += 50                             # r_wrist 1/3
    res = pckh_groups(pred, gt, vis, hb)
    assert res['Wrist'] == pytest.approx((100 + 100 / 3) / 2)  # pooled would be 2/4 = 50


def test_group_with_one_side_never_visible_uses_the_other():
    pred, gt, vis, hb = two_persons()
    vis[:, L_WRI] = 0
    pred[1, R_WRI] += 50
    rates, counts = pckh(pred, gt, vis, hb)
    assert math.isnan(rates[L_WRI]) and counts[L_WRI] == 0
    res = pckh_groups(pred, gt, vis, hb)
    assert res['Wrist'] == 50.                                  # HRNet would say NaN here
    assert res['Mean'] == pytest.approx(100 * (26 - 1) / 26)     # 13 counted joints × 2 persons, l_wrist weighs 0


def test_pelvis_and_thorax_excluded_from_mean_even_when_wrong_neck_and_head_counted():
    pred, gt, vis, hb = two_persons()
    pred[:, [PELVIS, THORAX]] += 100
    assert pckh_groups(pred, gt, vis, hb)['Mean'] == 100.
    pred[0, NECK] += 100  # upper_neck is in the Mean
    assert pckh_groups(pred, gt, vis, hb)['Mean'] == pytest.approx(100 * 27 / 28)
    pred[0, HEAD] += 100
    res = pckh_groups(pred, gt, vis, hb)
    assert res['Mean'] == pytest.approx(100 * 26 / 28) and res['Head'] == 50.


def test_mean_is_weighted_by_visible_counts_not_a_plain_average():
    pred, gt, vis, hb = two_persons()
    vis[1] = 0
    vis[1, R_SHO] = 1  # person 1: only r_shoulder, and it is wrong
    pred[1, R_SHO] += 50
    res = pckh_groups(pred, gt, vis, hb)
    assert res['Mean'] == pytest.approx(100 * 14 / 15)  # 14 correct of 15 counted instances
    plain = (13 * 100 + 50) / 14
    assert abs(res['Mean'] - plain) > 1                 # the plain mean of per-joint rates differs


def test_mean01_true_0_1_versus_hrnet_0_11():
    pred, gt, vis, hb = two_persons()
    pred[0] += [0.105 * 30, 0]
    pred[1] += [0.105 * 6, 0]
    assert pckh_groups(pred, gt, vis, hb)['Mean@0.1'] == 0.
    assert pckh_groups(pred, gt, vis, hb, mean01_thr=HRNET_MEAN01_THR)['Mean@0.1'] == 100.
    assert HRNET_MEAN01_THR == np.arange(0, 0.51, 0.01)[11] == 0.11
    assert pckh_groups(pred, gt, vis, hb)['Mean'] == 100.


def test_groups_order_and_indices():
    assert list(pckh_groups(*two_persons())) == KEYS == list(PCKH_COLUMNS)
    assert MPII_GROUPS == {'Head': (9,), 'Shoulder': (13, 12), 'Elbow': (14, 11), 'Wrist': (15, 10),
                           'Hip': (3, 2), 'Knee': (4, 1), 'Ankle': (5, 0)}


def test_weighted_mean_nothing_visible_is_nan():
    assert math.isnan(weighted_mean(np.full(16, np.nan), np.zeros(16, int)))


# ---------------------------------------------------------------- an independent loop over the official formula

def loop_reference(preds, jnt_missing, pos_gt_src, headboxes_src, mean01_index=10):
    "Straightforward loops over HRNet's evaluate(): joint-first arrays, thresholds of np.arange(0, 0.51, 0.01)."
    J, N = jnt_missing.shape
    thrs = np.arange(0, 0.5 + 0.01, 0.01)
    hits = {0.5: np.zeros(J), thrs[mean01_index]: np.zeros(J)}
    count = np.zeros(J)
    for n in range(N):
        hs = 0.6 * math.hypot(*(headboxes_src[1, :, n] - headboxes_src[0, :, n]))
        for j in range(J):
            if jnt_missing[j, n]: continue
            count[j] += 1
            e = math.hypot(*(preds[n, j] - pos_gt_src[j, :, n])) / hs
            for t in hits: hits[t][j] += e <= t
    pck = {t: 100 * h / count for t, h in hits.items()}
    p = pck[0.5]
    side = lambda a, b: 0.5 * (p[a] + p[b])
    w = count.copy()
    w[6:8] = 0
    w /= w.sum()
    return {'Head': p[9], 'Shoulder': side(13, 12), 'Elbow': side(14, 11), 'Wrist': side(15, 10), 'Hip': side(3, 2),
            'Knee': side(4, 1), 'Ankle': side(5, 0), 'Mean': np.sum(p * w), 'Mean@0.1': np.sum(pck[thrs[mean01_index]] * w)}


def random_mat(seed, n=60):
    "A random gt in gt_valid.mat layout (1-based) and 1-based predictions with errors around the thresholds."
    rng = np.random.default_rng(seed)
    gt = rng.uniform(1, 500, (n, 16, 2))
    lo = rng.uniform(1, 400, (n, 2))
    hb = np.stack([lo, lo + rng.uniform(8, 80, (n, 2))], 1)
    hs = 0.6 * np.linalg.norm(hb[:, 1] - hb[:, 0], axis=-1)
    ang = rng.uniform(0, 2 * np.pi, (n, 16))
    r = rng.choice([0.02, 0.09, 0.105, 0.3, 0.49, 0.51, 0.9], (n, 16)) * hs[:, None]
    preds = gt + np.stack([np.cos(ang), np.sin(ang)], -1) * r[..., None]
    missing = (rng.uniform(size=(n, 16)) < 0.25).astype(float)
    missing[:2] = 0  # every joint visible at least twice
    return preds, dict(jnt_missing=missing.T, pos_gt_src=gt.transpose(1, 2, 0), headboxes_src=hb.transpose(1, 2, 0))


@pytest.mark.parametrize('seed', [0, 1, 2])
def test_vectorised_matches_loop_reference(seed):
    preds, mat = random_mat(seed)
    want = loop_reference(preds, **mat)
    got = evaluate_pckh(preds, mat)
    assert list(got) == list(want)
    for k in KEYS: assert got[k] == pytest.approx(want[k], abs=1e-9), k
    hr = evaluate_pckh(preds, mat, mean01_thr=HRNET_MEAN01_THR)['Mean@0.1']
    assert hr == pytest.approx(loop_reference(preds, **mat, mean01_index=11)['Mean@0.1'], abs=1e-9)
    assert 0 < want['Mean@0.1'] < want['Mean'] < 100


# ---------------------------------------------------------------- files

def write_gt(path, mat, names=True):
    savemat(path, {**mat, **({'dataset_joints': MAT_NAMES} if names else {})})
    return path


def test_mat_round_trip(tmp_path):
    preds, mat = random_mat(5, n=20)
    gt = write_gt(tmp_path/'gt_valid.mat', mat)
    save_preds_mat(tmp_path/'pred.mat', preds - 1)   # project predictions are 0-based; the file is 1-based
    np.testing.assert_allclose(loadmat(tmp_path/'pred.mat')['preds'], preds)
    np.save(tmp_path/'pred.npy', preds)
    want = loop_reference(preds, **mat)
    for p in ('pred.mat', 'pred.npy'):
        got = evaluate_pckh_files(tmp_path/p, gt)
        for k in KEYS: assert got[k] == pytest.approx(want[k], abs=1e-9)
    assert json.loads(json.dumps(evaluate_pckh_files(str(tmp_path/'pred.mat'), str(gt), thr=0.5))).keys() == set(KEYS)


def test_gt_against_itself_is_100(tmp_path):
    _, mat = random_mat(6, n=10)
    gt = write_gt(tmp_path/'gt_valid.mat', mat, names=False)
    res = evaluate_pckh(load_gt_mat(gt)['pos_gt_src'].transpose(2, 0, 1), gt)
    assert all(v == 100. for v in res.values())


def test_from_gt_mat_layout():
    _, mat = random_mat(7, n=4)
    g = from_gt_mat(**mat)
    np.testing.assert_array_equal(g['gt'][2, 9], mat['pos_gt_src'][9, :, 2])
    np.testing.assert_array_equal(g['visible'][3], 1 - mat['jnt_missing'][:, 3])
    np.testing.assert_array_equal(g['headboxes'][1], mat['headboxes_src'][:, :, 1])  # [[x1, y1], [x2, y2]]


# ---------------------------------------------------------------- errors

def test_gt_mat_errors(tmp_path):
    _, mat = random_mat(8, n=5)
    with pytest.raises(FileNotFoundError, match='ground-truth file not found'): load_gt_mat(tmp_path/'nope.mat')
    savemat(tmp_path/'a.mat', {k: v for k, v in mat.items() if k != 'jnt_missing'})
    with pytest.raises(ValueError, match=r"a\.mat: key 'jnt_missing' is missing"): load_gt_mat(tmp_path/'a.mat')
    savemat(tmp_path/'b.mat', {**mat, 'headboxes_src': mat['headboxes_src'][0]})
    with pytest.raises(ValueError, match=r"b\.mat: key 'headboxes_src' has shape \(2, 5\), expected \(2, 2, N\)"): load_gt_mat(tmp_path/'b.mat')
    savemat(tmp_path/'c.mat', {**mat, 'jnt_missing': mat['jnt_missing'][:, :4]})
    with pytest.raises(ValueError, match='disagree on the number of persons'): load_gt_mat(tmp_path/'c.mat')
    savemat(tmp_path/'d.mat', {**mat, 'dataset_joints': MAT_NAMES[:, ::-1]})
    with pytest.raises(ValueError, match='not the MPII order'): load_gt_mat(tmp_path/'d.mat')
    (tmp_path/'e.mat').write_bytes(b'garbage')
    with pytest.raises(ValueError, match=r'e\.mat: not a readable MATLAB'): load_gt_mat(tmp_path/'e.mat')


def test_pred_file_errors(tmp_path):
    preds, mat = random_mat(9, n=5)
    gt = write_gt(tmp_path/'gt.mat', mat)
    with pytest.raises(FileNotFoundError, match='predictions file not found'): load_preds(tmp_path/'none.mat')
    savemat(tmp_path/'nokey.mat', {'pred': preds})
    with pytest.raises(ValueError, match="key 'preds' is missing"): load_preds(tmp_path/'nokey.mat')
    (tmp_path/'p.csv').write_text('1,2')
    with pytest.raises(ValueError, match=r"\.mat with key 'preds'.*or a \.npy"): load_preds(tmp_path/'p.csv')
    np.save(tmp_path/'p3.npy', np.zeros((5, 16, 3)))
    with pytest.raises(ValueError, match=r'p3\.npy: preds has shape \(5, 16, 3\), expected \(N, J, 2\)'): load_preds(tmp_path/'p3.npy')
    (tmp_path/'bad.npy').write_bytes(b'nope')
    with pytest.raises(ValueError, match='not a readable .npy'): load_preds(tmp_path/'bad.npy')
    np.save(tmp_path/'short.npy', preds[:4])
    with pytest.raises(ValueError, match=r'short\.npy has shape \(4, 16, 2\) but .*gt\.mat has \(5, 16, 2\)'):
        evaluate_pckh_files(tmp_path/'short.npy', gt)
    np.save(tmp_path/'coco.npy', np.zeros((5, 17, 2)))
    with pytest.raises(ValueError, match=r'\(5, 17, 2\) but'): evaluate_pckh_files(tmp_path/'coco.npy', gt)


def test_array_errors():
    pred, gt, vis, hb = two_persons()
    with pytest.raises(ValueError, match=r'pred has shape \(1, 16, 2\) but gt has \(2, 16, 2\)'): pckh(pred[:1], gt, vis, hb)
    with pytest.raises(ValueError, match=r'visible has shape \(2, 15\), expected \(2, 16\)'): pckh(pred, gt, vis[:, :15], hb)
    with pytest.raises(ValueError, match=r'headboxes has shape \(2, 4\), expected \(N, 2, 2\)'): pckh(pred, gt, vis, hb.reshape(2, 4))
    hb[1] = 0
    with pytest.raises(ValueError, match=r'must be positive .* persons \[1\]'): pckh(pred, gt, vis, hb)
    vis[1] = 0
    assert pckh(pred, gt, vis, hb)[1].max() == 1  # a person without visible joints may have an empty head box


def test_table_layout():
    res = dict(zip(KEYS, [97.071, 95.86, 89.59, 83.61, 89.29, 85.31, 81.48, 89.355, 31.33]))
    t = pckh_table({'finetune': res})
    assert list(t.columns) == KEYS and t.loc['finetune', 'Head'] == 97.07
    assert pckh_markdown({'finetune': res}).splitlines()[2].startswith('| finetune | 97.07 | 95.86 |')
    with pytest.raises(ValueError, match="lacks"): pckh_table({'x': {'Head': 1.}})


# ---------------------------------------------------------------- real-format fixture (optional)

def test_fixture_mpii_json_round_trip(tmp_path):
    ann = FIXTURES/'mpii'/'annot'/'test_mpii.json'
    if not ann.is_file(): pytest.skip(f'real-format fixtures not found at {ann} (only in the shared workspace)')
    persons = json.loads(ann.read_text())
    joints = np.array([p['joints'] for p in persons], float)        # 1-based, -1 where missing
    vis = np.array([p['joints_vis'] for p in persons], float)
    size = np.linalg.norm(joints[:, 9] - joints[:, 8], axis=-1)     # a head box around neck → head top
    mid = (joints[:, 9] + joints[:, 8]) / 2
    hb = np.stack([mid - size[:, None] / 2, mid + size[:, None] / 2], 1)
    mat = dict(jnt_missing=1 - vis.T, pos_gt_src=joints.transpose(1, 2, 0), headboxes_src=hb.transpose(1, 2, 0))
    gt = write_gt(tmp_path/'gt_valid.mat', mat)
    save_preds_mat(tmp_path/'pred.mat', joints - 1)                 # 0-based predictions equal to the annotation
    res = evaluate_pckh_files(tmp_path/'pred.mat', gt)
    assert all(v == 100. for v in res.values())
    counts = pckh(joints, joints, vis, hb)[1]
    assert counts[0] == counts[5] == vis[:, 0].sum() < len(persons)  # the fixture has persons without ankles
