"Tests of dphpe.data: real-format loaders (on shared/fixtures when present), the affine crop, PoseDataset, errors."
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from scipy.io import savemat
from torch.utils.data import DataLoader

from dphpe.data import (Person, DatasetError, load_mpii, load_coco, load_humanart, affine_transform, invert_affine,
                        transform_points, warp, crop_person, to_image_coords, crop_matrix, PoseDataset, NO_MASK,
                        clean_bbox, box_center_scale)
from dphpe.joints import MPII, COCO, flip_joints

FIX = (Path(__file__).parents[1]/'..'/'shared'/'fixtures').resolve()

def need(sub):
    if not (FIX/sub).is_dir(): pytest.skip(f"real-format fixtures absent: {FIX/sub} (they live beside the repo in shared/fixtures)")
    return FIX/sub

def raw_json(p): return json.loads(Path(p).read_text())

# ---------------------------------------------------------------- MPII fixture
def test_mpii_fixture_counts_shapes_and_0_based():
    root = need('mpii')
    raw = raw_json(root/'annot'/'test_mpii.json')
    ps = load_mpii(root, 'test_mpii')
    assert len(ps) == len(raw) == 5
    assert len({p.id for p in ps}) == 5
    for p, r in zip(ps, raw):
        assert p.layout is MPII and p.joints.shape == (16, 2) and p.visible.shape == (16,) and p.joints.dtype == np.float32
        np.testing.assert_array_equal(p.joints, np.array(r['joints'], np.float32) - 1)
        np.testing.assert_array_equal(p.visible, r['joints_vis'])
        assert p.image == (root/'images'/r['image']).absolute() and p.image.exists()
        assert p.headbox is None and p.mask is None
    # joints missing in the file (written as -1, -1) keep vis 0
    p2 = ps[2]
    assert p2.visible[0] == 0 and p2.visible[5] == 0
    np.testing.assert_array_equal(p2.joints[[0, 5]], [[-2, -2], [-2, -2]])

def test_mpii_fixture_center_scale_hrnet_order():
    root = need('mpii')
    raw = raw_json(root/'annot'/'test_mpii.json')
    for p, r in zip(load_mpii(root, 'test_mpii'), raw):
        s = r['scale']  # HRNet: c[1] += 15*s (unpadded s, 1-based), s *= 1.25, then c -= 1
        np.testing.assert_allclose(p.center, [r['center'][0] - 1, r['center'][1] + 15 * s - 1], atol=1e-4)
        np.testing.assert_allclose(p.scale, [1.25 * s, 1.25 * s], rtol=1e-6)
    p = load_mpii(root, 'test_mpii')[0]  # hand-computed for the first record: c (966, 340), s 4.718488
    np.testing.assert_allclose(p.center, [965.0, 409.77732], atol=1e-3)
    np.testing.assert_allclose(p.scale, 5.89811, atol=1e-5)

def test_mpii_scale_follows_the_head_on_real_and_synthetic_files(tmp_path):
    "Real MPII sets `scale` from the head (upper neck to head top = scale·200/6); the synthetic MPII files do the same."
    raw = raw_json(need('mpii')/'annot'/'test_mpii.json')
    head = lambda r: np.linalg.norm(np.subtract(r['joints'][9], r['joints'][8]))
    np.testing.assert_allclose([head(r) / (r['scale'] * 200) for r in raw], 1 / 6, rtol=1e-3)
    from dphpe.synth import make_synth
    synth = raw_json(make_synth('tiny', root=tmp_path/'synth', progress=False)/'mpii'/'annot'/'train.json')
    both = [r for r in synth if r['joints_vis'][8] and r['joints_vis'][9]]  # written joints are visible ones; -1 otherwise
    assert len(both) > 10
    np.testing.assert_allclose([head(r) / (r['scale'] * 200) for r in both], 1 / 6, rtol=2e-3)  # 2-decimal joints, 4-decimal scale

def test_mpii_gt_mat_headboxes(tmp_path):
    root = need('mpii')
    n = len(raw_json(root/'annot'/'test_mpii.json'))
    hb = np.zeros((2, 2, n))
    hb[0, :, :] = np.arange(n) + 10
    hb[1, :, :] = np.arange(n) + 50  # 1-based corners
    savemat(tmp_path/'gt_valid.mat', {'headboxes_src': hb, 'jnt_missing': np.zeros((16, n)), 'pos_gt_src': np.zeros((16, 2, n))})
    ps = load_mpii(root, 'test_mpii', gt_mat=tmp_path/'gt_valid.mat')
    np.testing.assert_array_equal(ps[3].headbox, [[12, 12], [52, 52]])
    savemat(tmp_path/'short.mat', {'headboxes_src': hb[..., :4]})
    with pytest.raises(DatasetError, match="has 4 persons but the annotation file has 5"): load_mpii(root, 'test_mpii', gt_mat=tmp_path/'short.mat')
    with pytest.raises(FileNotFoundError, match="gt_mat .*nope.mat does not exist"): load_mpii(root, 'test_mpii', gt_mat=tmp_path/'nope.mat')

# ---------------------------------------------------------------- COCO / Human-Art fixtures
def hrnet_cs(bbox, w_img, h_img, aspect=0.75):
    "Independent restatement of HRNet's COCO _load_coco_keypoint_annotation_kernal + _xywh2cs."
    x, y, w, h = bbox
    x1, y1 = max(0, x), max(0, y)
    x2, y2 = min(w_img - 1, x1 + max(0, w - 1)), min(h_img - 1, y1 + max(0, h - 1))
    w, h = x2 - x1, y2 - y1
    c = np.array([x1 + w * 0.5, y1 + h * 0.5])
    if w > aspect * h: h = w / aspect
    elif w < aspect * h: w = h * aspect
    return c, np.array([w, h]) / 200 * 1.25

def test_coco_fixture_filtering_and_values():
    root = need('coco')
    raw = raw_json(root/'annotations'/'test_coco.json')
    ps = load_coco(root, 'val2017', ann_file='annotations/test_coco.json')
    kept = [a for a in raw['annotations'] if a['num_keypoints'] > 0 and a['iscrowd'] == 0]
    assert len(raw['annotations']) == 14 and len(ps) == len(kept) == 12
    imgs = {i['id']: i for i in raw['images']}
    for p, a in zip(ps, kept):
        kp = np.array(a['keypoints'], np.float32).reshape(17, 3)
        assert p.layout is COCO and p.id == str(a['id']) and p.image_id == a['image_id']
        np.testing.assert_array_equal(p.joints, kp[:, :2])
        np.testing.assert_array_equal(p.visible, kp[:, 2] > 0)
        np.testing.assert_allclose(p.bbox, a['bbox'], rtol=1e-6)
        assert p.area == pytest.approx(a['area'])
        c, s = hrnet_cs(a['bbox'], imgs[a['image_id']]['width'], imgs[a['image_id']]['height'])
        np.testing.assert_allclose(p.center, c, rtol=1e-5)
        np.testing.assert_allclose(p.scale, s, rtol=1e-5)
        assert p.scale[0] / p.scale[1] == pytest.approx(0.75, rel=1e-5)
        assert p.image == (root/'val2017'/imgs[a['image_id']]['file_name']).absolute()
    # the input aspect ratio changes the boxes
    sq = load_coco(root, 'val2017', ann_file='annotations/test_coco.json', input_size=(256, 256))
    assert all(p.scale[0] == pytest.approx(p.scale[1]) for p in sq)

def test_coco_crowd_and_category_filtering(tmp_path):
    root = need('coco')
    raw = raw_json(root/'annotations'/'test_coco.json')
    anns = raw['annotations']
    anns[0]['iscrowd'] = 1
    anns[1]['category_id'] = 2
    anns[2]['area'] = 0
    (tmp_path/'annotations').mkdir()
    (tmp_path/'annotations'/'person_keypoints_val2017.json').write_text(json.dumps(raw))
    ps = load_coco(tmp_path, 'val2017', img_dir=root/'val2017')
    assert len(ps) == 12 - 3 and not {str(a['id']) for a in anns[:3]} & {p.id for p in ps}

def test_humanart_fixture_paths():
    root = need('humanart')
    raw = raw_json(root/'HumanArt'/'annotations'/'test_humanart.json')
    ps = load_humanart(root, 'test')
    assert len(ps) == 4 and all(p.layout is COCO and p.joints.shape == (17, 2) for p in ps)
    files = {i['id']: i['file_name'] for i in raw['images']}
    for p, a in zip(ps, raw['annotations']):
        assert p.image == (root/files[a['image_id']]).absolute() and p.image.exists()
        assert p.image.relative_to(root.absolute()).parts[:2] == ('HumanArt', 'images')
        np.testing.assert_array_equal(p.joints, np.array(a['keypoints'], np.float32).reshape(17, 3)[:, :2])
    assert [p.image for p in load_humanart(root/'HumanArt', 'test')] == [p.image for p in ps]  # HumanArt/ itself as root

def test_fixture_crops_round_trip_and_batch():
    ps = load_mpii(need('mpii'), 'test_mpii') + []
    for p in ps:
        crop, cj = crop_person(None, p, (256, 192))
        assert crop.shape == (256, 192, 3) and crop.dtype == np.uint8
        np.testing.assert_allclose(to_image_coords(cj, p.center, p.scale, (256, 192)), p.joints, atol=1e-3)
    b = next(iter(DataLoader(PoseDataset(ps, (256, 192)), batch_size=5)))
    assert b['image'].shape == (5, 3, 256, 192) and b['image'].dtype == torch.float32
    assert 0 <= b['image'].min() and b['image'].max() <= 1
    assert b['joints'].shape == (5, 16, 2) and b['visible'].shape == (5, 16) and b['mask'].shape == (5, 256, 192)
    assert (b['mask'] == NO_MASK).all()
    assert (b['visible'] <= torch.from_numpy(np.stack([p.visible for p in ps]))).all()
    back = to_image_coords(b['joints'].numpy(), b['center'].numpy(), b['scale'].numpy(), (256, 192))
    vis = b['visible'].numpy() > 0
    np.testing.assert_allclose(back[vis], np.stack([p.joints for p in ps])[vis], atol=1e-3)

# ---------------------------------------------------------------- affine transform and crop
def hrnet_reference(center, scale, rot, size):
    "HRNet's three-point construction solved as a linear system (what cv2.getAffineTransform does)."
    H, W = size
    sw = scale[0] * 200
    r = np.deg2rad(rot)
    v = np.array([0, -sw / 2])
    v = np.array([v[0] * np.cos(r) - v[1] * np.sin(r), v[0] * np.sin(r) + v[1] * np.cos(r)])
    third = lambda a, b: b + np.array([-(a - b)[1], (a - b)[0]])
    src = [np.asarray(center, float), np.asarray(center, float) + v]
    src.append(third(*src))
    dst = [np.array([W / 2, H / 2]), np.array([W / 2, H / 2 - W / 2])]
    dst.append(third(*dst))
    return np.linalg.solve(np.hstack([np.array(src), np.ones((3, 1))]), np.array(dst)).T

@pytest.mark.parametrize('c,s,r', [([100, 50], [1, 1], 0), ([321.5, 80], [1.7, 2.2], 30), ([5, 700], [0.3, 0.4], -47), ([0, 0], [2, 1], 180)])
def test_affine_matches_hrnet_and_round_trips(c, s, r):
    M = affine_transform(c, s, r, (256, 192))
    np.testing.assert_allclose(M, hrnet_reference(c, s, r, (256, 192)), atol=1e-9)
    np.testing.assert_allclose(affine_transform(c, s, r, (256, 192), inv=True), invert_affine(M), atol=1e-12)
    pts = np.random.default_rng(1).uniform(-1000, 2000, (200, 2))
    np.testing.assert_allclose(transform_points(transform_points(pts, M), invert_affine(M)), pts, atol=1e-3)
    np.testing.assert_allclose(transform_points([c], M), [[96, 128]], atol=1e-4)  # centre → (W/2, H/2)

def blob(cx, cy, size=(60, 80), sigma=2.5):
    yy, xx = np.mgrid[:size[0], :size[1]]
    return np.exp(-((xx - cx) ** 2 + (yy - cy) ** 2) / (2 * sigma ** 2)).astype(np.float32)

def centroid(a): return (np.indices(a.shape).reshape(2, -1)[::-1] * a.ravel()).sum(1) / a.sum()

@pytest.mark.parametrize('c,s,r', [([40, 30], [0.4, 0.4], 0), ([33, 21], [0.1, 0.1], 0), ([35, 25], [0.3, 0.3], 90), ([30, 20], [0.5, 0.5], -33)])
def test_warp_puts_a_dot_where_the_joint_goes(c, s, r):
    M = affine_transform(c, s, r, (64, 48))
    out = np.asarray(warp(Image.fromarray(blob(33.3, 21.6), 'F'), M, (64, 48)), float)
    np.testing.assert_allclose(centroid(out), transform_points([33.3, 21.6], M), atol=0.02)

def test_crop_person_rgb_dot():
    img = np.repeat((blob(33.3, 21.6) * 255).round().astype(np.uint8)[..., None], 3, -1)
    p = Person('/x.jpg', [[33.3, 21.6]] * 16, np.ones(16), [40, 30], [0.3, 0.3], MPII, 'q')
    crop, cj = crop_person(img, p, (64, 48))
    np.testing.assert_allclose(centroid(crop[..., 1].astype(float)), cj[0], atol=0.05)
    # hand-computed: k = 48 / 60 = 0.8; (33.3 - 40) * 0.8 + 24, (21.6 - 30) * 0.8 + 32
    np.testing.assert_allclose(cj[0], [18.64, 25.28], atol=1e-4)

# ---------------------------------------------------------------- PoseDataset, flip, augmentation
@pytest.fixture
def scene(tmp_path):
    "An 80×60 scene with a red dot at the right wrist (35, 22) and a label map, in MPII format."
    (tmp_path/'annot').mkdir()
    (tmp_path/'images').mkdir()
    (tmp_path/'masks').mkdir()
    img = np.full((60, 80, 3), 90, np.uint8)
    img[21:24, 34:37] = (255, 0, 0)
    Image.fromarray(img).save(tmp_path/'images'/'s.png')
    lab = np.zeros((60, 80), np.uint8)
    lab[10:50, 30:50] = 1
    lab[10:20, 35:45] = 2
    Image.fromarray(lab).save(tmp_path/'masks'/'s.png')
    js = np.tile([[41., 31.]], (16, 1))
    js[MPII.index('r_wrist')] = [36, 23]
    js[MPII.index('l_wrist')] = [46, 23]
    rec = {'image': 's.png', 'center': [41, 26], 'scale': 0.25, 'joints': js.tolist(), 'joints_vis': [1] * 16, 'mask': 's.png'}
    (tmp_path/'annot'/'train.json').write_text(json.dumps([rec]))
    return load_mpii(tmp_path)

def red_peak(image): return np.array(np.unravel_index((image[0] - image[1]).argmax(), image.shape[1:]))[::-1]

def test_flip_consistency(scene):
    rw, lw = MPII.index('r_wrist'), MPII.index('l_wrist')
    plain = PoseDataset(scene, (64, 48))[0]
    fl = PoseDataset(scene, (64, 48), augment=True, rot_prob=0, scale_factor=0, flip_prob=1)[0]
    np.testing.assert_allclose(fl['joints'][lw], [47 - plain['joints'][rw][0].item(), plain['joints'][rw][1].item()], atol=1e-4)
    np.testing.assert_allclose(red_peak(fl['image'].numpy()), fl['joints'][lw], atol=0.51)  # the dot is now the left wrist
    np.testing.assert_array_equal(fl['image'].numpy(), plain['image'].numpy()[..., ::-1])
    np.testing.assert_array_equal(fl['mask'].numpy(), plain['mask'].numpy()[:, ::-1])
    j = plain['joints'].numpy()
    np.testing.assert_array_equal(flip_joints(flip_joints(j, 48, MPII), 48, MPII), j)  # flip twice = identity
    F = crop_matrix([41, 26], [0.25, 0.25], 0, True, (64, 48))
    F2 = np.r_[[[-1, 0, 47], [0, 1, 0]]] @ np.r_[F, [[0, 0, 1]]]
    np.testing.assert_allclose(F2, affine_transform([41, 26], [0.25, 0.25], 0, (64, 48)), atol=1e-12)

def test_dataset_dot_mask_and_visibility(scene):
    it = PoseDataset(scene, (64, 48))[0]
    np.testing.assert_allclose(red_peak(it['image'].numpy()), it['joints'][MPII.index('r_wrist')], atol=0.51)
    assert set(it['mask'].unique().tolist()) == {0, 1, 2} and it['mask'].dtype == torch.uint8
    # nearest-neighbour: the label at a transformed interior point is the source label there
    M = affine_transform(scene[0].center, scene[0].scale, 0, (64, 48))
    x, y = transform_points([[40, 30]], M)[0].round().astype(int)
    assert it['mask'][y, x] == 1
    # joints outside the crop lose `visible`
    far = Person(scene[0].image, scene[0].joints, scene[0].visible, [75, 5], [0.05, 0.05], MPII, 'far')
    assert PoseDataset([far], (64, 48))[0]['visible'].sum() == 0
    assert it['visible'].sum() == 16

def test_augmentation_reproducible_and_consistent(scene):
    ds = PoseDataset(scene * 12, (64, 48), augment=True, seed=3)
    a, b = ds[5], PoseDataset(scene * 12, (64, 48), augment=True, seed=3)[5]
    for k in ('image', 'joints', 'visible', 'mask', 'scale'): assert torch.equal(a[k], b[k])
    ds.set_epoch(1)
    assert not torch.equal(ds[5]['joints'], a['joints'])
    ds.set_epoch(0)
    rots = [ds.augmentation(i)[1] for i in range(12)]
    assert any(r != 0 for r in rots) and max(map(abs, rots)) <= 30
    for i in range(12):
        it = ds[i]
        j = MPII.index('l_wrist' if ds.augmentation(i)[2] else 'r_wrist')
        np.testing.assert_allclose(red_peak(it['image'].numpy()), it['joints'][j], atol=1.5)
    assert all(PoseDataset(scene, augment=False).augmentation(0) == (1., 0., False) for _ in range(2))

# ---------------------------------------------------------------- errors
def test_missing_root_and_annotation(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"MPII root .*nowhere does not exist\. Expected layout: <root>/annot/<split>\.json"):
        load_mpii(tmp_path/'nowhere')
    (tmp_path/'annot').mkdir()
    with pytest.raises(FileNotFoundError, match=r"valid\.json does not exist"): load_mpii(tmp_path, 'valid')
    with pytest.raises(FileNotFoundError, match=r"No annotation file found; tried: .*person_keypoints_val2017\.json\. Expected layout"):
        load_coco(tmp_path, 'val2017')
    with pytest.raises(FileNotFoundError, match=r"Human-Art root"): load_humanart(tmp_path/'nowhere')

def test_missing_image(tmp_path):
    (tmp_path/'annot').mkdir()
    (tmp_path/'images').mkdir()
    rec = {'image': 'gone.jpg', 'center': [10, 10], 'scale': 1, 'joints': [[1, 1]] * 16, 'joints_vis': [1] * 16}
    (tmp_path/'annot'/'train.json').write_text(json.dumps([rec]))
    with pytest.raises(FileNotFoundError, match=r"1 of 1 image files are missing, e\.g\. .*images/gone\.jpg\. Expected layout"):
        load_mpii(tmp_path)
    Image.new('RGB', (20, 20)).save(tmp_path/'images'/'gone.jpg')
    (tmp_path/'annot'/'train.json').write_text(json.dumps([{**rec, 'mask': 'm.png'}]))
    with pytest.raises(FileNotFoundError, match=r"1 of 1 mask files are missing"): load_mpii(tmp_path)

@pytest.mark.parametrize('content,msg', [
    ('[{"image": "a.jpg",', r"train\.json: not valid JSON"),
    ('{"image": "a.jpg"}', r"train\.json: expected a JSON list of persons, got a dict"),
    (json.dumps([{'image': 'a.jpg', 'center': [1, 1], 'scale': 1, 'joints_vis': [1] * 16}]), r"train\.json: person 0 has no 'joints' key"),
    (json.dumps([{'image': 'a.jpg', 'center': [1, 1], 'scale': 1, 'joints': [[1, 1]] * 16, 'joints_vis': [1] * 16},
                 {'image': 'a.jpg', 'center': [1, 1], 'scale': 1, 'joints': [[1, 1]] * 14, 'joints_vis': [1] * 16}]),
     r"train\.json: person 1: 'joints' has shape \(14, 2\), expected \(16, 2\)"),
    (json.dumps([{'image': 'a.jpg', 'center': [1, 1], 'scale': 'big', 'joints': [[1, 1]] * 16, 'joints_vis': [1] * 16}]),
     r"person 0: 'scale' is not numeric"),
])
def test_malformed_mpii(tmp_path, content, msg):
    (tmp_path/'annot').mkdir()
    (tmp_path/'images').mkdir()
    Image.new('RGB', (8, 8)).save(tmp_path/'images'/'a.jpg')
    (tmp_path/'annot'/'train.json').write_text(content)
    with pytest.raises(DatasetError, match=msg): load_mpii(tmp_path)

def test_malformed_coco(tmp_path):
    (tmp_path/'annotations').mkdir()
    (tmp_path/'images').mkdir()
    Image.new('RGB', (80, 60)).save(tmp_path/'images'/'b.jpg')
    im = {'id': 1, 'file_name': 'b.jpg', 'width': 80, 'height': 60}
    ann = {'id': 7, 'image_id': 1, 'keypoints': [10, 20, 2] * 17, 'bbox': [5, 5, 40, 50], 'num_keypoints': 17, 'iscrowd': 0, 'area': 9.}
    f = tmp_path/'annotations'/'person_keypoints_train.json'
    def load(d):
        f.write_text(json.dumps(d))
        return load_coco(tmp_path, 'train')
    assert [p.id for p in load({'images': [im], 'annotations': [ann]})] == ['7']
    with pytest.raises(DatasetError, match=r"annotation 0 \(id 7\): 'keypoints' has shape \(48,\), expected \(51,\)"):
        load({'images': [im], 'annotations': [{**ann, 'keypoints': [1] * 48}]})
    with pytest.raises(DatasetError, match=r"the file has no 'annotations' key"): load({'images': [im]})
    with pytest.raises(DatasetError, match=r"images\[0\] has no 'width' key"): load({'images': [{'id': 1, 'file_name': 'b.jpg', 'height': 60}], 'annotations': []})
    with pytest.raises(DatasetError, match=r"names image_id 2, which is not in 'images'"): load({'images': [im], 'annotations': [{**ann, 'image_id': 2}]})
    with pytest.raises(FileNotFoundError, match=r"No image folder found; tried: .*val"): load_coco(tmp_path, 'train', img_dir='val')

def test_person_is_read_only_and_clean_bbox():
    p = Person('a.jpg', np.zeros((16, 2)), np.ones(16), [1, 2], [1, 1], MPII, 'a')
    with pytest.raises(ValueError, match='read-only'): p.joints[0, 0] = 3
    assert clean_bbox([-10, 5, 30, 400], 100, 200).tolist() == [0, 5, 29, 194]
    c, s = box_center_scale([0, 0, 30, 40], aspect=0.75)
    np.testing.assert_allclose(s, [30 / 200 * 1.25, 40 / 200 * 1.25])
    with pytest.raises(TypeError, match=r"Unknown augmentation option\(s\) \['flip'\]"): PoseDataset([p], flip=0.5)
