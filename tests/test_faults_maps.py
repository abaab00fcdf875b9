"""Faults in ROS map YAML files: each bad key fails naming the file, the key, the value and what is
allowed, and an oversized image is refused from its header, before any pixel is decoded.

The maps are tiny (10 x 8 pixels of 0.5 m = 5 m x 4 m, inside the 8 m x 8 m room of env=families);
the oversized ones are PGM headers without pixel data, so only a header-reading guard can answer.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import yaml
from PIL import Image

from navexp import compose_config
from navexp.task.maps import MapSpec
from navexp.task.maps.random_family import LayoutSpec
from navexp.task.maps.ros_map import MAX_MAP_PIXELS, read_map_header, read_occupancy
from navexp.task.maps.scenario_files import load_scenario_file, scenario_entry_names

SPEC = replace(LayoutSpec.from_env_cfg(compose_config(["env=families"]).env), wall_slots=8)
"""8 m room, 8 wall slots (the 5 m x 4 m maps take 4 for the room beyond them)."""
KEYS = {
    "image": "tiny.pgm",
    "resolution": "0.5",
    "origin": "[0.0, 0.0, 0.0]",
    "occupied_thresh": "0.65",
    "free_thresh": "0.196",
    "negate": "0",
    "starts_goals": "[{robot: {x: 0.5, y: 0.5}, goal: {x: 4.5, y: 3.5}}]",
}
"""A valid map YAML, key -> YAML text; the tests replace or drop one key."""


def _pixels() -> np.ndarray:
    """10 x 8 pixels: a wall in image row 2 over columns 0-5 (6 cells), a 2 x 2 block at rows 6-7,
    columns 8-9 (4 cells), and one grey pixel (100: p = (255 - 100) / 255 = 0.608) at row 0, column 0."""
    px = np.full((8, 10), 254, dtype=np.uint8)
    px[2, 0:6] = 0
    px[6:8, 8:10] = 0
    px[0, 0] = 100
    return px


def _write(tmp_path, drop: str | None = None, **override: str):
    Image.fromarray(_pixels()).save(tmp_path / "tiny.pgm")
    keys = {k: v for k, v in {**KEYS, **override}.items() if k != drop}
    path = tmp_path / "tiny.yaml"
    path.write_text("".join(f"{k}: {v}\n" for k, v in keys.items()))
    return path


def _load(path):
    return load_scenario_file(path, SPEC, MapSpec())


def _fails(path, *parts: str, kind: type[Exception] = ValueError) -> str:
    """Load ``path`` expecting ``kind``; the message names the file and contains every part."""
    with pytest.raises(kind) as e:
        _load(path)
    msg = str(e.value)
    assert str(path) in msg
    for part in parts:
        assert part in msg, (part, msg)
    return msg


def test_a_valid_map_loads_its_ten_occupied_cells_into_two_walls(tmp_path):
    """The wall row (6 cells) and the block (4 cells) are 10 occupied cells and 2 rectangles; the grey
    pixel (p = 0.608) is below occupied_thresh 0.65, so it is no wall."""
    path = _write(tmp_path)
    occ = read_occupancy(path, read_map_header(path, yaml.safe_load(path.read_text())))
    assert occ.shape == (8, 10) and int(occ.sum()) == 10
    lay = _load(path)
    # 2 walls of occupied cells, 1 of the grey pixel (unknown: 0.196 < 0.608 < 0.65, blocked), 4 strips
    # walling off the room beyond the 5 m x 4 m map.
    assert lay.num_worlds == 1 and int(lay.wall_active[0].sum()) == 2 + 1 + 4


def test_occupied_thresh_below_a_grey_pixel_makes_it_a_third_wall(tmp_path):
    """occupied_thresh 0.6 < 0.608: the grey pixel is occupied too, 11 cells and 3 rectangles
    (free_thresh 0.196 stays below it)."""
    path = _write(tmp_path, occupied_thresh="0.6")
    occ = read_occupancy(path, read_map_header(path, yaml.safe_load(path.read_text())))
    assert int(occ.sum()) == 11
    assert int(_load(path).wall_active[0].sum()) == 3 + 4  # blocked as unknown before, occupied now


def test_a_map_without_image_gets_the_map_error_not_the_scenarios_error(tmp_path):
    """resolution/origin/... but no image: the error is about the map's image, in the loader and in the
    entry names used by evaluation."""
    path = _write(tmp_path, drop="image")
    msg = _fails(path, "image: missing", "PGM/PNG image relative to the YAML")
    assert "scenarios:" not in msg
    with pytest.raises(ValueError, match="image: missing"):
        scenario_entry_names(path)


def test_a_yaml_with_only_resolution_is_read_as_a_map(tmp_path):
    """One map key (resolution) is enough to be a map: image and origin are reported missing."""
    path = tmp_path / "partial.yaml"
    path.write_text("resolution: 0.05\n")
    msg = _fails(path, "image: missing")
    assert "scenarios:" not in msg


def test_origin_that_is_not_three_numbers_names_the_key_and_the_form(tmp_path):
    """origin: 5 (was a TypeError from len()) and a 2-element origin name the value and [x, y, yaw]."""
    _fails(_write(tmp_path, origin="5"), "origin=5 is invalid", "a list [x, y, yaw] of 3 finite numbers")
    _fails(_write(tmp_path, origin="[1.0, 2.0]"), "origin=[1.0, 2.0]", "[x, y, yaw]")
    _fails(_write(tmp_path, origin="[1.0, .nan, 0.0]"), "origin=[1.0, nan, 0.0]", "finite")


@pytest.mark.parametrize("text, shown", [("abc", "'abc'"), (".nan", "nan"), ("0", "0"), ("-0.05", "-0.05")])
def test_resolution_must_be_a_finite_positive_number(tmp_path, text, shown):
    """resolution abc (was 'could not convert string to float' without the file), NaN (was accepted),
    0 and -0.05: each names the value and 'a finite number > 0 (metres per pixel)'."""
    _fails(
        _write(tmp_path, resolution=text),
        f"resolution={shown} is invalid",
        "resolution must be a finite number > 0 (metres per pixel)",
    )


@pytest.mark.parametrize("text, shown", [("1.5", "1.5"), (".nan", "nan"), ("-0.5", "-0.5"), ("1", "1")])
def test_occupied_thresh_outside_zero_one_is_refused(tmp_path, text, shown):
    """1.5 and NaN (were a silently empty map), -0.5 (was a misleading error) and 1 (p > 1 marks no
    pixel): each names the value and the range [0, 1)."""
    _fails(
        _write(tmp_path, occupied_thresh=text, free_thresh="0.1"),
        f"occupied_thresh={shown} is invalid",
        "occupied_thresh must be a number in [0, 1)",
    )


@pytest.mark.parametrize("text", ["0.65", "0.9"])
def test_free_thresh_at_or_above_occupied_thresh_is_refused(tmp_path, text):
    """free_thresh 0.65 and 0.9 with occupied_thresh 0.65: map_server needs free < occupied."""
    _fails(
        _write(tmp_path, free_thresh=text),
        f"free_thresh={float(text)} is invalid",
        "below occupied_thresh=0.65",
    )


def test_free_thresh_and_negate_out_of_range_name_their_choices(tmp_path):
    """free_thresh -0.1 names [0, 1]; negate 2 names 0 | 1."""
    _fails(_write(tmp_path, free_thresh="-0.1"), "free_thresh=-0.1 is invalid", "in [0, 1]")
    _fails(_write(tmp_path, negate="2"), "negate=2 is invalid", "negate must be 0 | 1")


def test_num_pairs_that_is_not_a_positive_integer_names_the_key(tmp_path):
    """num_pairs: abc (was int('abc') without the file) and 0 name the key and 'an integer >= 1'."""
    for text in ("abc", "0"):
        path = _write(tmp_path, drop="starts_goals")
        path.write_text(path.read_text() + f"num_pairs: {text}\n")
        _fails(path, "num_pairs=", "num_pairs must be an integer >= 1")


def _header_only_pgm(tmp_path, w: int, h: int) -> None:
    """A PGM whose header declares w x h pixels but holds none: only a header read succeeds."""
    (tmp_path / "tiny.pgm").write_bytes(f"P5\n{w} {h}\n255\n".encode())


def test_a_map_image_above_the_pixel_limit_is_refused_from_its_header(tmp_path):
    """12000 x 12000 = 144000000 pixels > 4096 x 4096 = 16777216 (was 54 s and 7.4 GB): refused
    naming the size and the limit; the file holds no pixels, so nothing was decoded."""
    path = _write(tmp_path, resolution="0.0005")
    _header_only_pgm(tmp_path, 12000, 12000)
    assert MAX_MAP_PIXELS == 4096 * 4096 == 16777216
    _fails(path, "'tiny.pgm' is 12000 x 12000 = 144000000 pixels", "above the limit of 16777216 pixels")


def test_a_map_image_above_twice_pils_limit_is_refused_too(tmp_path):
    """20000 x 20000 = 400000000 pixels: PIL refuses to open it; the error still names the file and our
    limit."""
    path = _write(tmp_path)
    _header_only_pgm(tmp_path, 20000, 20000)
    _fails(path, "'tiny.pgm' is too large", "400000000 pixels", "above the limit of 16777216 pixels")


def test_a_map_larger_than_the_room_is_refused_before_decoding(tmp_path):
    """400 x 400 pixels of 0.5 m = 200 m, larger than the 8 m room: the room error comes from the header
    (the file holds no pixels, decoding it would fail)."""
    path = _write(tmp_path)
    _header_only_pgm(tmp_path, 400, 400)
    _fails(path, "the map is 200.00 m x 200.00 m, larger than the room (8.0 m x 8.0 m)")


def test_a_truncated_map_image_names_the_file(tmp_path):
    """A 10 x 8 header with no pixels, inside the room: decoding fails naming the YAML and the image."""
    path = _write(tmp_path)
    _header_only_pgm(tmp_path, 10, 8)
    _fails(path, "'tiny.pgm' could not be decoded")


def test_a_map_whose_image_is_not_an_image_names_the_file(tmp_path):
    """tiny.pgm holding text: 'not a readable PGM/PNG image'."""
    path = _write(tmp_path)
    (tmp_path / "tiny.pgm").write_text("hello")
    _fails(path, "'tiny.pgm' is not a readable PGM/PNG image")


def test_the_limit_message_names_the_module_constant(tmp_path, monkeypatch):
    """With MAX_MAP_PIXELS lowered to 79, the valid 10 x 8 = 80 pixel map is refused: the guard
    compares W x H with the constant (strictly above)."""
    import navexp.task.maps.ros_map as sf

    path = _write(tmp_path)
    monkeypatch.setattr(sf, "MAX_MAP_PIXELS", 79)
    msg = _fails(path, "10 x 8 = 80 pixels", "above the limit of 79 pixels (MAX_MAP_PIXELS)")
    assert "crop or downsample" in msg
    monkeypatch.setattr(sf, "MAX_MAP_PIXELS", 80)
    assert _load(path).num_worlds == 1
