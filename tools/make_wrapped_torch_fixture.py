#!/usr/bin/env python3
"""Writes tests/fixtures/import/torch_save_wrapped/: the state-spaces Mamba
fixture saved the way many training scripts save, as
torch.save({'state_dict': sd, 'epoch': 3}, path).

Needs no torch: it wraps the committed plain state_dict pickle
(state_spaces_mamba_bin/pytorch_model.bin) in an outer dict at the pickle-opcode
level and rewrites the zip with the same stored tensor files. The result is the
byte layout torch.save produces for a dict holding a state_dict (the outer dict
first, then SETITEMS), which once made TorchCheckpoint::open free the dict it was
iterating over.
"""
import os
import shutil
import struct
import zipfile

ROOT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "import")


def binunicode(s: str) -> bytes:
    b = s.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def main() -> None:
    src_dir = os.path.join(ROOT, "state_spaces_mamba_bin")
    out_dir = os.path.join(ROOT, "torch_save_wrapped")
    os.makedirs(out_dir, exist_ok=True)
    for name in ("config.json", "expected.safetensors"):  # same weights, same reference logits
        shutil.copy(os.path.join(src_dir, name), out_dir)
    src = zipfile.ZipFile(os.path.join(src_dir, "pytorch_model.bin"))
    pkl_name = next(n for n in src.namelist() if n.endswith("/data.pkl"))
    inner = src.read(pkl_name)
    assert inner[:2] == b"\x80\x02" and inner[-1:] == b".", "expected a protocol-2 pickle"
    # PROTO 2, EMPTY_DICT, MARK, 'state_dict', <inner value>, 'epoch', 3, SETITEMS, STOP
    outer = (b"\x80\x02}(" + binunicode("state_dict") + inner[2:-1] + binunicode("epoch") + b"K\x03u.")
    with zipfile.ZipFile(os.path.join(out_dir, "pytorch_model.bin"), "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            data = outer if info.filename == pkl_name else src.read(info.filename)
            dst.writestr(info.filename, data)


if __name__ == "__main__":
    main()
