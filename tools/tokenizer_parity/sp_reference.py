#!/usr/bin/python3
"""sentencepiece side of the tokenizer parity suite (Debian's python3-sentencepiece).

  sp_reference.py encode MODEL < texts (one JSON string per line)
      one JSON object per text: text_index, ids, tokens, offsets (sentencepiece's
      piece spans, in code points as the Python binding gives them),
      byte_offsets (the same spans in UTF-8 bytes),
      decoded, decoded_skip. Encoding is sentencepiece's plain encode: the whole
      text at once, no BOS/EOS (the models here come with no tokenizer_config).
  sp_reference.py pieces MODEL
      the model's pieces as JSON: [{"piece", "score", "type"}]
"""
import json
import sys

import sentencepiece as spm


def piece_type(sp, i):
    if sp.is_unknown(i):
        return "unknown"
    if sp.is_control(i):
        return "control"
    if sp.is_byte(i):
        return "byte"
    if sp.is_unused(i):
        return "unused"
    return "normal"


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("encode", "pieces"):
        sys.exit("usage: sp_reference.py encode|pieces MODEL")
    sp = spm.SentencePieceProcessor(model_file=sys.argv[2])
    if sys.argv[1] == "pieces":
        json.dump([{"piece": sp.id_to_piece(i), "score": sp.get_score(i), "type": piece_type(sp, i)}
                   for i in range(sp.get_piece_size())], sys.stdout, ensure_ascii=False)
        return
    for index, line in enumerate(sys.stdin.read().split("\n")):
        if not line:
            continue
        text = json.loads(line)
        proto = sp.encode_as_immutable_proto(text)
        ids = [p.id for p in proto.pieces]
        # The Python binding reports piece spans in code points (it converts
        # sentencepiece's byte spans); byte_offsets are the same spans in the
        # UTF-8 bytes of the text, as the engine reports them.
        offsets = [[p.begin, p.end] for p in proto.pieces]
        byte_at = [0]
        for ch in text:
            byte_at.append(byte_at[-1] + len(ch.encode("utf-8", "surrogatepass")))
        byte_offsets = [[byte_at[b], byte_at[e]] for b, e in offsets]
        decoded = sp.decode(ids)
        row = {"text_index": index, "ids": ids, "tokens": [sp.id_to_piece(i) for i in ids],
               "offsets": offsets, "byte_offsets": byte_offsets,
               "decoded": decoded, "decoded_skip": decoded, "ids_plain": ids}
        sys.stdout.write(json.dumps(row, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
