// A recognizer of the prefixes of one JSON object (RFC 8259), byte by byte:
// feed() says whether the bytes so far can still be completed into a valid
// JSON object, complete() whether they are one. JSON mode
// (infer/json_constraint.h) runs it over each candidate token's bytes.
//
// Strictness is that of a strict parser (nlohmann::json, Python's json):
// strings hold valid UTF-8 (no overlong forms or surrogates) and no raw
// control characters, \u escapes pair their surrogates, numbers have no
// leading zeros. Two bounds keep a generation from running away without
// progress: nesting stops at kMaxDepth, and whitespace between tokens at
// kMaxWhitespaceRun bytes in a row. The state is a few bytes: copying it to
// try a token costs nothing.
#pragma once

#include <cstdint>
#include <string_view>

namespace hymba::infer {

class JsonPrefix {
 public:
  static constexpr int kMaxDepth = 64;
  static constexpr int kMaxWhitespaceRun = 64;

  // False (and the state unchanged) when the byte cannot continue a JSON object.
  bool feed(uint8_t byte);
  // Feeds every byte; false at the first refused one (the state is then undefined).
  bool feed(std::string_view bytes);
  // The object is closed: nothing may follow.
  bool complete() const { return mode_ == Mode::kDone; }
  // Containers open, plus one inside a string: how far from complete.
  int open() const { return depth_ + (in_string() ? 1 : 0); }

 private:
  enum class Mode : uint8_t {
    kStart,         // before the object: whitespace or '{'
    kValue,         // a value is expected
    kKeyOrClose,    // after '{': a key or '}'
    kKey,           // after ',' in an object: a key
    kColon,         // after a key
    kValueOrClose,  // after '[': a value or ']'
    kAfterValue,    // ',' or the container's close
    kString,
    kEscape,
    kHex,           // hex_left_ digits of \u left
    kLowBackslash,  // a high surrogate's \u: the low one's '\' must follow
    kLowU,          // ... and its 'u'
    kUtf8,          // continuation bytes left in a multi-byte character
    kMinus,         // number states
    kZero,
    kInt,
    kDot,
    kFrac,
    kExp,
    kExpSign,
    kExpDigits,
    kLiteral,  // the rest of true / false / null
    kDone,
  };
  bool in_string() const;
  bool value_start(uint8_t c);
  bool after_value(uint8_t c);
  bool string_byte(uint8_t c);
  bool number_byte(uint8_t c);
  bool escape_byte(uint8_t c);
  bool hex_byte(uint8_t c);
  bool whitespace(uint8_t c);
  bool open_container(bool object);
  void value_done() { mode_ = Mode::kAfterValue; }

  Mode mode_ = Mode::kStart;
  uint8_t depth_ = 0;
  uint8_t ws_run_ = 0;
  bool key_ = false;  // the string being read is an object key
  uint8_t hex_left_ = 0;
  uint16_t code_ = 0;      // the \u value being read
  bool want_low_ = false;  // the \u being read must be a low surrogate
  uint8_t utf8_left_ = 0;
  uint8_t utf8_lo_ = 0x80, utf8_hi_ = 0xBF;  // range of the next continuation byte
  const char* literal_ = nullptr;            // the literal's bytes still expected
  uint64_t objects_ = 0;                     // bit d: level d is an object (else an array)
};

}  // namespace hymba::infer
