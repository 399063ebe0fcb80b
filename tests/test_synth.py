"Tests of the embedded synthetic datasets (dphpe.synth): formats, conventions, determinism and caching."
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from scipy.io import loadmat

from dphpe.joints import COCO, MPII
from dphpe.synth import (ANNOTATION_FILES, MASK_LABELS, coco_entry, make_synth, mpii_entry, render_person,
                         render_sample, synth_params, synth_summary)

FIXTURES = Path(__file__).parents[1]/'..'/'shared'/'fixtures'
SMALL = dict(img_size=(96, 96), mpii_train=10, mpii_valid=6, coco_train=5, coco_val=3, humanart_train=5, humanart_val=3)


def _annots(root):
    return {k: (Path(root)/f).read_bytes() for k, f in ANNOTATION_FILES.items()}


@pytest.fixture(scope='module')
def tiny(tmp_path_factory):
    "The `tiny` preset, generated once (in-process) into a temporary folder."
    return make_synth('tiny', root=tmp_path_factory.mktemp('tiny'), workers=0, progress=False)


# ---------- determinism, workers, caching

def test_same_seed_same_bytes_other_seed_differs(tiny, tmp_path):
    again = make_synth('tiny', root=tmp_path/'again', workers=0, progress=False)
    assert _annots(again) == _annots(tiny)
    assert (again/'mpii'/'images'/'100000007.jpg').read_bytes() == (tiny/'mpii'/'images'/'100000007.jpg').read_bytes()
    other = make_synth('tiny', root=tmp_path/'other', seed=1, workers=0, progress=False, **SMALL)
    small = make_synth('tiny', root=tmp_path/'small', seed=0, workers=0, progress=False, **SMALL)
    assert all(_annots(other)[k] != _annots(small)[k] for k in ANNOTATION_FILES)


def test_independent_of_worker_count(tmp_path):
    a = make_synth('tiny', root=tmp_path/'w0', workers=0, progress=False, **SMALL)
    b = make_synth('tiny', root=tmp_path/'w2', workers=2, progress=False, **SMALL)
    assert _annots(a) == _annots(b)
    ims = sorted(p.relative_to(a) for p in a.rglob('*.jpg'))
    assert ims == sorted(p.relative_to(b) for p in b.rglob('*.jpg')) and len(ims) == 32
    assert all((a/p).read_bytes() == (b/p).read_bytes() for p in ims)


def test_cache_hit_and_invalidation(tmp_path, monkeypatch):
    monkeypatch.setenv('DPHPE_CACHE', str(tmp_path))
    r1 = make_synth('tiny', workers=0, progress=False, **SMALL)
    assert r1.parent == tmp_path/'synth' and r1.name.startswith('tiny-')
    m1 = (r1/'manifest.json').stat().st_mtime_ns
    assert make_synth('tiny', workers=0, progress=False, **SMALL) == r1
    assert (r1/'manifest.json').stat().st_mtime_ns == m1  # not regenerated
    r2 = make_synth('tiny', workers=0, progress=False, **(SMALL | dict(coco_val=4)))  # a parameter changed
    assert r2 != r1 and synth_summary(r2)['counts']['coco/val'] == 4
    # same explicit root, changed parameter: regenerated in place
    fixed = tmp_path/'fixed'
    make_synth('tiny', root=fixed, workers=0, progress=False, **SMALL)
    h = json.loads((fixed/'manifest.json').read_text())['hash']
    make_synth('tiny', root=fixed, workers=0, progress=False, **(SMALL | dict(mpii_valid=7)))
    man = json.loads((fixed/'manifest.json').read_text())
    assert man['hash'] != h and man['counts']['mpii/valid'] == 7 and len(json.loads((fixed/'mpii/annot/valid.json').read_text())) == 7


def test_interrupted_run_is_regenerated(tmp_path):
    r = make_synth('tiny', root=tmp_path/'x', workers=0, progress=False, **SMALL)
    (r/'manifest.json').unlink()
    (r/'mpii'/'annot'/'train.json').unlink()  # as if killed before the end
    with pytest.raises(FileNotFoundError, match='no complete synthetic dataset'): synth_summary(r)
    make_synth('tiny', root=r, workers=0, progress=False, **SMALL)
    assert synth_summary(r)['counts']['mpii/train'] == 10


def test_manifest_and_summary(tiny):
    man = json.loads((tiny/'manifest.json').read_text())
    assert man['complete'] and man['synthetic'] and man['preset'] == 'tiny' and man['seed'] == 0
    assert man['params'] == synth_params('tiny') and man['mask_labels'] == MASK_LABELS and len(man['source_sha256']) == 64
    s = synth_summary(tiny)
    assert s['counts'] == {'mpii/train': 64, 'mpii/valid': 24, 'coco/train': 48, 'coco/val': 16, 'humanart/train': 32, 'humanart/val': 16}
    assert s['images'] == 200 and s['bytes'] > 0


def test_bad_arguments():
    with pytest.raises(ValueError, match="unknown synth preset 'huge'"): make_synth('huge')
    with pytest.raises(ValueError, match=r"unknown synth parameter\(s\) \['mpii_trian'\]"): make_synth('tiny', mpii_trian=3)


# ---------- formats

def test_coco_and_humanart_load_with_pycocotools(tiny):
    from pycocotools.coco import COCO as CocoApi
    for f, n in (('coco/annotations/person_keypoints_train.json', 48), ('coco/annotations/person_keypoints_val.json', 16),
                 ('humanart/HumanArt/annotations/training_humanart.json', 32), ('humanart/HumanArt/annotations/validation_humanart.json', 16)):
        api = CocoApi(str(tiny/f))
        assert len(api.getAnnIds()) == n and len(api.getImgIds()) == n
        cat = api.loadCats(1)[0]
        assert cat['name'] == 'person' and len(cat['keypoints']) == 17
        for a in api.loadAnns(api.getAnnIds()[:5]):
            k = np.array(a['keypoints']).reshape(17, 3)
            assert a['iscrowd'] == 0 and a['category_id'] == 1 and a['num_keypoints'] == int((k[:, 2] > 0).sum())
            assert (k[k[:, 2] == 0, :2] == 0).all()
            assert np.isclose(api.annToMask(a).sum(), a['area'])  # segmentation RLE matches the area
    ha = json.loads((tiny/'humanart/HumanArt/annotations/training_humanart.json').read_text())
    for im in ha['images']:
        assert im['file_name'].startswith('HumanArt/images/2D_virtual_human/') and (tiny/'humanart'/im['file_name']).exists()


def test_mpii_json_layout(tiny):
    ents = json.loads((tiny/'mpii'/'annot'/'train.json').read_text())
    for e in ents:
        assert {'image', 'center', 'scale', 'joints', 'joints_vis', 'headbox', 'mask'} <= set(e)
        assert len(e['joints']) == 16 and len(e['joints_vis']) == 16 and e['scale'] > 0
        assert (tiny/'mpii'/'images'/e['image']).exists() and (tiny/'mpii'/'masks'/e['mask']).exists()


def test_gt_valid_mat(tiny):
    g = loadmat(str(tiny/'mpii'/'annot'/'gt_valid.mat'))
    ents = json.loads((tiny/'mpii'/'annot'/'valid.json').read_text())
    n = len(ents)
    assert g['jnt_missing'].shape == (16, n) and g['pos_gt_src'].shape == (16, 2, n) and g['headboxes_src'].shape == (2, 2, n)
    assert np.where(g['dataset_joints'] == 'head')[1][0] == 9 and np.where(g['dataset_joints'] == 'rank')[1][0] == 0
    np.testing.assert_allclose(g['pos_gt_src'][:, :, 3], ents[3]['joints'])
    np.testing.assert_allclose(g['headboxes_src'][:, :, 3], ents[3]['headbox'])
    np.testing.assert_array_equal(g['jnt_missing'].T, 1 - np.array([e['joints_vis'] for e in ents]))
    # HRNet's evaluate() on the ground truth itself: every annotated joint within 0.5 head sizes
    preds = np.array([e['joints'] for e in ents], float)
    err = np.linalg.norm(np.transpose(preds, [1, 2, 0]) - g['pos_gt_src'], axis=1)
    hs = 0.6 * np.linalg.norm(g['headboxes_src'][1] - g['headboxes_src'][0], axis=0)
    assert ((err / hs <= .5) | (g['jnt_missing'] == 1)).all() and (hs > 0).all()


def test_label_maps(tiny):
    seen, with_identity, masks = set(), 0, sorted((tiny/'mpii'/'masks').glob('*.png'))
    for f in masks:
        m = np.asarray(Image.open(f))
        im = Image.open(tiny/'mpii'/'images'/f.with_suffix('.jpg').name)
        assert m.dtype == np.uint8 and m.shape == (im.height, im.width) and set(np.unique(m)) <= set(MASK_LABELS.values())
        assert (m == MASK_LABELS['body']).any()  # every image shows its person
        with_identity += (m == MASK_LABELS['identity']).any()
        seen |= set(np.unique(m).tolist())
    assert seen == {0, 1, 2, 3} and with_identity >= .9 * len(masks)  # a head can hide (bending, seen from behind)


def test_coco_format_persons_carry_their_label_maps(tiny):
    "The COCO and Human-Art loaders give each person the label map its image record names, so MaskDP's view runs on them."
    import torch
    from dphpe.data import PoseDataset, load_coco, load_humanart
    from dphpe.features import MaskView
    for persons in (load_coco(tiny/'coco', 'train'), load_humanart(tiny/'humanart', 'training')):
        assert persons and all(p.mask is not None and p.mask.exists() for p in persons)
        assert all(p.mask.stem == p.image.stem for p in persons)  # each image's own map
        item = PoseDataset(persons[:4], (64, 48))[0]
        assert (item['mask'] == MASK_LABELS['body']).any()  # the person is in its crop's map
        view = MaskView((64, 48))({'image': item['image'][None].float() / 255, 'mask': item['mask'][None]})
        assert view.shape == (1, 3, 64, 48) and torch.isclose(view, torch.tensor(.5)).any()  # private pixels filled


# ---------- coordinate conventions

def test_one_based_mpii_zero_based_coco():
    sc = render_sample('mpii', 'valid', 5, img_size=(128, 128))
    e = mpii_entry(sc, 'x.jpg')
    _, ann = coco_entry(sc, 1, 'x.jpg', 'x.png')
    vis = np.array(e['joints_vis']) > 0
    kp = np.array(ann['keypoints']).reshape(17, 3)
    j0 = np.array([sc['joints'][n] for n in MPII.joints])
    np.testing.assert_allclose(np.array(e['joints'])[vis], j0[vis] + 1, atol=.006)
    np.testing.assert_allclose(np.array(e['headbox']), sc['headbox'] + 1, atol=.006)
    for n in ('l_hip', 'r_knee', 'l_shoulder'):  # the same joint: MPII one pixel right/down of COCO
        if kp[COCO.index(n), 2] and vis[MPII.index(n)]:
            np.testing.assert_allclose(np.array(e['joints'][MPII.index(n)]) - 1, kp[COCO.index(n), :2], atol=.011)
    # the head box (0-based) sits on the head's pixels in the label map
    (x1, y1), (x2, y2) = sc['headbox']
    assert sc['mask'][int(round((y1 + y2) / 2)), int(round((x1 + x2) / 2))] == MASK_LABELS['identity']


@pytest.mark.parametrize('yaw', [0, 10, -15])
def test_left_right_front_and_back(yaw):
    f, b = render_person('standing', yaw, seed=2), render_person('standing', 180 + yaw, seed=2)
    x = lambda r, n: r['joints'][n][0]
    for n in ('shoulder', 'hip', 'elbow'):
        assert x(f, 'r_' + n) < x(f, 'l_' + n), f'front view: r_{n} should be at image left'
        assert x(b, 'r_' + n) > x(b, 'l_' + n), f'back view: r_{n} should be at image right'


def test_missing_joints_marked_as_mpii(tiny):
    ents = json.loads((tiny/'mpii'/'annot'/'train.json').read_text())
    n_missing = 0
    for i, e in enumerate(ents):
        sc = render_sample('mpii', 'train', i, img_size=(128, 128))
        H, W = sc['size']
        for k, name in enumerate(MPII.joints):
            x, y = sc['joints'][name]
            inside = 0 <= x <= W - 1 and 0 <= y <= H - 1
            assert e['joints_vis'][k] == int(inside)
            if not inside:
                assert e['joints'][k] == [-1.0, -1.0]
                n_missing += 1
    assert n_missing > 0, 'the tiny preset should contain truncated persons'


def test_views_cover_front_back_side(tiny):
    yaws = np.array([render_sample('mpii', 'train', i, img_size=(64, 64))['yaw'] for i in range(40)])
    a = (yaws + 180) % 360 - 180
    assert (np.abs(a) < 30).any() and (np.abs(a) > 150).any() and ((np.abs(a) > 60) & (np.abs(a) < 120)).any()


# ---------- against the real-format fixtures

def test_same_layout_as_real_fixtures(tiny):
    if not FIXTURES.exists(): pytest.skip(f'real-format fixtures not found at {FIXTURES} (only in the development checkout)')
    real = json.loads((FIXTURES/'mpii'/'annot'/'test_mpii.json').read_text())
    ours = json.loads((tiny/'mpii'/'annot'/'valid.json').read_text())
    assert set(real[0]) <= set(ours[0])
    for k in real[0]: assert type(real[0][k]) is type(ours[0][k]) or {type(real[0][k]), type(ours[0][k])} <= {int, float}
    missing = [j for p in real for j, v in zip(p['joints'], p['joints_vis']) if v == 0]
    assert missing and all(j == [-1.0, -1.0] for j in missing)  # the convention the writer follows
    rc = json.loads((FIXTURES/'coco'/'annotations'/'test_coco.json').read_text())
    oc = json.loads((tiny/'coco'/'annotations'/'person_keypoints_val.json').read_text())
    assert rc['categories'][0]['keypoints'] == oc['categories'][0]['keypoints']
    assert rc['categories'][0]['skeleton'] == oc['categories'][0]['skeleton']
    assert set(rc['annotations'][0]) <= set(oc['annotations'][0]) and set(rc['images'][0]) & set(oc['images'][0]) >= {'id', 'file_name', 'height', 'width'}
    rh = json.loads((FIXTURES/'humanart'/'HumanArt'/'annotations'/'test_humanart.json').read_text())
    oh = json.loads((tiny/'humanart'/'HumanArt'/'annotations'/'training_humanart.json').read_text())
    assert rh['images'][0]['file_name'].split('/')[:2] == oh['images'][0]['file_name'].split('/')[:2] == ['HumanArt', 'images']
    assert rh['categories'][0]['keypoints'][:17] == oh['categories'][0]['keypoints']
