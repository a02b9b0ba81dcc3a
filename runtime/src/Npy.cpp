//===- Npy.cpp - NumPy .npy and .npz reader and writer --------------------===//
//
// Exceptions stop here: the standard library may throw (bad_alloc) inside
// this file, and every public function catches everything, because the
// callers build with -fno-exceptions.
//
//===----------------------------------------------------------------------===//

#include "loomrt/Npy.h"

#include "Support.h"
#include "Zip.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>
#include <string_view>
#include <utility>

namespace loomrt {

using detail::ByteSpan;
using detail::ErrorSink;
using detail::formatShape;
using detail::isValidUtf8;
using detail::quoteName;

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;
// np.save pads the header so the data starts at a multiple of this, and
// leaves room for the first dimension to grow to this many digits.
constexpr size_t kArrayAlign = 64;
constexpr size_t kGrowthAxisMaxDigits = 21;
// Deeper nesting than any real header needs; bounds the parser's recursion.
constexpr int kMaxLiteralDepth = 32;
constexpr std::string_view kNpySuffix = ".npy";
constexpr bool kHostLittleEndian = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;

/// The NumPy kind letter and size of each DType that NumPy has ("f4").
struct NpyType {
  DType dtype;
  std::string_view code;
};
// NumPy has no bfloat16: ml_dtypes' bfloat16 arrays are saved as two-byte
// void elements ('<V2'), which is how bf16 is read here (and written, as
// '|V2', NumPy's own spelling of that type).
constexpr NpyType kNpyTypes[] = {
    {DType::F64, "f8"}, {DType::F32, "f4"}, {DType::F16, "f2"},
    {DType::BF16, "V2"}, {DType::I64, "i8"}, {DType::I32, "i4"},
    {DType::I16, "i2"}, {DType::I8, "i1"},  {DType::U8, "u1"},
    {DType::Bool, "b1"},
};

std::string supportedDescrs() {
  std::string out;
  for (const NpyType &type : kNpyTypes) {
    if (!out.empty())
      out += ", ";
    out += "'" + npyDescr(type.dtype) + "'";
  }
  return out;
}

//===----------------------------------------------------------------------===//
// The header: a Python literal, parsed by hand
//===----------------------------------------------------------------------===//

/// A Python literal of the few kinds a header can hold.
struct PyValue {
  enum class Kind { String, Int, Bool, None, Tuple, List, Dict };
  Kind kind = Kind::None;
  std::string text; // String: the value; Int: the digits, with any sign.
  bool boolean = false;
  // Tuple and List: the elements; Dict: key, value, key, value, ...
  std::vector<PyValue> items;
};

const char *kindName(PyValue::Kind kind) {
  switch (kind) {
  case PyValue::Kind::String:
    return "a string";
  case PyValue::Kind::Int:
    return "an integer";
  case PyValue::Kind::Bool:
    return "a bool";
  case PyValue::Kind::None:
    return "None";
  case PyValue::Kind::Tuple:
    return "a tuple";
  case PyValue::Kind::List:
    return "a list";
  case PyValue::Kind::Dict:
    return "a dict";
  }
  return "a value";
}

/// Parses the subset of Python literal syntax that ast.literal_eval accepts
/// and headers use: strings, integers, True/False/None, tuples, lists, dicts.
class LiteralParser {
public:
  explicit LiteralParser(std::string_view text) : text(text) {}

  /// Parses one literal, which only whitespace may follow.
  bool parse(PyValue &out, std::string &message) {
    if (!parseValue(out, 0)) {
      message = std::move(error);
      return false;
    }
    skipSpace();
    if (pos != text.size()) {
      fail("unexpected " + describe() + " after the literal");
      message = std::move(error);
      return false;
    }
    return true;
  }

private:
  static bool isSpace(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' ||
           c == '\v';
  }
  static bool isDigit(char c) { return c >= '0' && c <= '9'; }
  static bool isNameChar(char c) {
    return isDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           c == '_';
  }

  void skipSpace() {
    while (pos < text.size() && isSpace(text[pos]))
      ++pos;
  }
  bool fail(const std::string &message) {
    error = message + " at offset " + std::to_string(pos);
    return false;
  }
  std::string describe() const {
    if (pos >= text.size())
      return "end of header";
    return "character " + quoteName(text.substr(pos, 1));
  }

  bool parseValue(PyValue &out, int depth) {
    skipSpace();
    if (pos >= text.size())
      return fail("expected a value, found the end of the header");
    char c = text[pos];
    if (c == '\'' || c == '"')
      return parseString(out);
    if (c == '(' || c == '[' || c == '{') {
      if (depth >= kMaxLiteralDepth)
        return fail("literal nested more than " +
                    std::to_string(kMaxLiteralDepth) + " deep");
      return parseSequence(out, depth);
    }
    if (isDigit(c) || c == '-' || c == '+')
      return parseInteger(out);
    if (isNameChar(c)) {
      size_t begin = pos;
      while (pos < text.size() && isNameChar(text[pos]))
        ++pos;
      std::string_view name = text.substr(begin, pos - begin);
      if (name == "True" || name == "False") {
        out.kind = PyValue::Kind::Bool;
        out.boolean = name == "True";
        return true;
      }
      if (name == "None") {
        out.kind = PyValue::Kind::None;
        return true;
      }
      pos = begin;
      return fail("unexpected name " + quoteName(name));
    }
    return fail("unexpected " + describe());
  }

  bool parseString(PyValue &out) {
    char quote = text[pos++];
    out.kind = PyValue::Kind::String;
    for (;;) {
      if (pos >= text.size() || text[pos] == '\n')
        return fail("unterminated string");
      char c = text[pos++];
      if (c == quote)
        return true;
      if (c != '\\') {
        out.text += c;
        continue;
      }
      if (pos >= text.size())
        return fail("unterminated string");
      char e = text[pos++];
      switch (e) {
      case '\\':
      case '\'':
      case '"':
        out.text += e;
        break;
      case 'n':
        out.text += '\n';
        break;
      case 't':
        out.text += '\t';
        break;
      case 'r':
        out.text += '\r';
        break;
      case '0':
        out.text += '\0';
        break;
      case 'x': {
        auto hexValue = [](char h) {
          if (isDigit(h))
            return h - '0';
          if (h >= 'a' && h <= 'f')
            return h - 'a' + 10;
          if (h >= 'A' && h <= 'F')
            return h - 'A' + 10;
          return -1;
        };
        if (text.size() - pos < 2 || hexValue(text[pos]) < 0 ||
            hexValue(text[pos + 1]) < 0)
          return fail("bad \\x escape");
        out.text += static_cast<char>(hexValue(text[pos]) * 16 +
                                      hexValue(text[pos + 1]));
        pos += 2;
        break;
      }
      default:
        --pos;
        return fail("unsupported escape \\" + std::string(1, e));
      }
    }
  }

  bool parseInteger(PyValue &out) {
    out.kind = PyValue::Kind::Int;
    if (text[pos] == '-' || text[pos] == '+') {
      if (text[pos] == '-')
        out.text += '-';
      ++pos;
    }
    size_t begin = pos;
    while (pos < text.size() && isDigit(text[pos]))
      ++pos;
    if (pos == begin)
      return fail("expected digits");
    std::string_view digits = text.substr(begin, pos - begin);
    if (digits.size() > 1 && digits[0] == '0') {
      pos = begin;
      return fail("integer with a leading zero");
    }
    out.text += digits;
    // Python 2 wrote longs as 3L; NumPy still reads such headers.
    if (pos < text.size() && (text[pos] == 'L' || text[pos] == 'l'))
      ++pos;
    if (pos < text.size() && (isNameChar(text[pos]) || text[pos] == '.'))
      return fail("unexpected " + describe() + " in an integer");
    return true;
  }

  bool parseSequence(PyValue &out, int depth) {
    char open = text[pos++];
    char close = open == '(' ? ')' : open == '[' ? ']' : '}';
    out.kind = open == '('   ? PyValue::Kind::Tuple
               : open == '[' ? PyValue::Kind::List
                             : PyValue::Kind::Dict;
    bool comma = false; // Whether a comma followed the last element.
    size_t count = 0;
    for (;;) {
      skipSpace();
      if (pos < text.size() && text[pos] == close) {
        ++pos;
        break;
      }
      if (count > 0 && !comma)
        return fail("expected ',' or '" + std::string(1, close) + "', found " +
                    describe());
      PyValue item;
      if (!parseValue(item, depth + 1))
        return false;
      out.items.push_back(std::move(item));
      if (out.kind == PyValue::Kind::Dict) {
        skipSpace();
        if (pos >= text.size() || text[pos] != ':')
          return fail("expected ':', found " + describe());
        ++pos;
        PyValue value;
        if (!parseValue(value, depth + 1))
          return false;
        out.items.push_back(std::move(value));
      }
      ++count;
      skipSpace();
      comma = pos < text.size() && text[pos] == ',';
      if (comma)
        ++pos;
    }
    // "(3)" is the integer 3 in parentheses; only "(3,)" is a tuple.
    if (out.kind == PyValue::Kind::Tuple && count == 1 && !comma) {
      PyValue inner = std::move(out.items[0]);
      out = std::move(inner);
    }
    return true;
  }

  std::string_view text;
  size_t pos = 0;
  std::string error;
};

/// Converts an Int literal to int64, or std::nullopt if it does not fit.
std::optional<int64_t> toInt64(const std::string &text) {
  bool negative = !text.empty() && text[0] == '-';
  uint64_t magnitude = 0;
  for (size_t i = negative ? 1 : 0; i < text.size(); ++i) {
    uint64_t digit = static_cast<uint64_t>(text[i] - '0');
    if (magnitude > (std::numeric_limits<uint64_t>::max() - digit) / 10)
      return std::nullopt;
    magnitude = magnitude * 10 + digit;
  }
  uint64_t limit = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  if (!negative)
    return magnitude <= limit ? std::optional<int64_t>(int64_t(magnitude))
                              : std::nullopt;
  if (magnitude <= limit)
    return -static_cast<int64_t>(magnitude);
  if (magnitude == limit + 1)
    return std::numeric_limits<int64_t>::min();
  return std::nullopt;
}

/// Resolves a 'descr' string; `swap` says whether the data is byte-swapped
/// relative to little-endian.
std::optional<DType> dtypeFromDescr(std::string_view descr, bool &swap) {
  if (descr.size() < 2)
    return std::nullopt;
  char order = descr[0];
  if (order != '<' && order != '>' && order != '|' && order != '=')
    return std::nullopt;
  for (const NpyType &type : kNpyTypes) {
    if (descr.substr(1) != type.code)
      continue;
    // '|' (not applicable) and '=' (native) both mean this machine's order,
    // as np.dtype reads them; single bytes have no order at all.
    bool big =
        order == '>' || ((order == '|' || order == '=') && !kHostLittleEndian);
    swap = big && dtypeSize(type.dtype) > 1;
    return type.dtype;
  }
  return std::nullopt;
}

/// What the header says, and where the data starts.
struct Header {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  bool fortranOrder = false;
  bool swap = false;
  size_t dataOffset = 0;
  size_t dataSize = 0;
};

bool parseHeader(const uint8_t *bytes, size_t size, const std::string &what,
                 const ErrorSink &sink, Header &header) {
  auto formatError = [&](const std::string &message) {
    sink.set(ErrorCode::Format, what + ": " + message);
    return false;
  };
  auto unsupported = [&](const std::string &message) {
    sink.set(ErrorCode::Unsupported, what + ": " + message);
    return false;
  };
  if (size >= 4 && bytes[0] == 'P' && bytes[1] == 'K' &&
      ((bytes[2] == 3 && bytes[3] == 4) || (bytes[2] == 5 && bytes[3] == 6)))
    return formatError("not a .npy file: it is a zip archive (an .npz file?)");
  if (size > 0 && std::memcmp(bytes, kMagic, std::min(size, kMagicSize)) != 0)
    return formatError("not a .npy file (it does not start with the "
                       "\\x93NUMPY magic)");
  if (size < kMagicSize + 2)
    return formatError(std::to_string(size) +
                       " bytes, too few for the .npy magic and version "
                       "(truncated)");
  unsigned major = bytes[6], minor = bytes[7];
  if (major < 1 || major > 3 || minor != 0)
    return unsupported("format version " + std::to_string(major) + "." +
                       std::to_string(minor) +
                       " is not supported (only 1.0, 2.0 and 3.0)");
  size_t lengthSize = major == 1 ? 2 : 4;
  size_t prefix = kMagicSize + 2 + lengthSize;
  if (size < prefix)
    return formatError(std::to_string(size) +
                       " bytes, too few for the .npy magic, version and "
                       "header length (truncated)");
  uint64_t headerSize = 0;
  for (size_t i = lengthSize; i-- > 0;)
    headerSize = (headerSize << 8) | bytes[kMagicSize + 2 + i];
  if (headerSize > size - prefix)
    return formatError("header length " + std::to_string(headerSize) +
                       " exceeds the " + std::to_string(size - prefix) +
                       " bytes after the header length field (truncated)");
  if (headerSize > kNpyMaxHeaderSize)
    return formatError("header length " + std::to_string(headerSize) +
                       " exceeds the limit of " +
                       std::to_string(kNpyMaxHeaderSize) + " bytes");
  std::string_view text(reinterpret_cast<const char *>(bytes + prefix),
                        static_cast<size_t>(headerSize));
  // Versions 1.0 and 2.0 are Latin-1, where every byte is a character; the
  // parser accepts only ASCII outside strings anyway.
  if (major == 3 && !isValidUtf8(text))
    return formatError("header is not valid UTF-8 (format version 3.0)");

  PyValue dict;
  std::string problem;
  if (!LiteralParser(text).parse(dict, problem))
    return formatError("header is not a Python literal: " + problem);
  if (dict.kind != PyValue::Kind::Dict)
    return formatError("header is " + std::string(kindName(dict.kind)) +
                       ", not a dict");
  const PyValue *descr = nullptr, *fortran = nullptr, *shape = nullptr;
  for (size_t i = 0; i < dict.items.size(); i += 2) {
    const PyValue &key = dict.items[i];
    if (key.kind != PyValue::Kind::String)
      return formatError("header has a key that is " +
                         std::string(kindName(key.kind)) + ", not a string");
    const PyValue **slot = key.text == "descr"           ? &descr
                           : key.text == "fortran_order" ? &fortran
                           : key.text == "shape"         ? &shape
                                                         : nullptr;
    if (!slot)
      return formatError("header has unexpected key " + quoteName(key.text) +
                         " (expected 'descr', 'fortran_order' and 'shape')");
    if (*slot)
      return formatError("header has key " + quoteName(key.text) + " twice");
    *slot = &dict.items[i + 1];
  }
  if (!descr || !fortran || !shape)
    return formatError(std::string("header lacks the key ") +
                       (!descr     ? "'descr'"
                        : !fortran ? "'fortran_order'"
                                   : "'shape'"));

  if (descr->kind == PyValue::Kind::List)
    return unsupported("structured dtypes (a list as 'descr') are not "
                       "supported");
  if (descr->kind != PyValue::Kind::String)
    return formatError("'descr' must be a string, got " +
                       std::string(kindName(descr->kind)));
  std::optional<DType> dtype = dtypeFromDescr(descr->text, header.swap);
  if (!dtype)
    return unsupported("dtype " + quoteName(descr->text) +
                       " is not supported (supported: " + supportedDescrs() +
                       ", in either byte order)");
  header.dtype = *dtype;

  if (fortran->kind != PyValue::Kind::Bool)
    return formatError("'fortran_order' must be True or False, got " +
                       std::string(kindName(fortran->kind)));
  header.fortranOrder = fortran->boolean;

  if (shape->kind != PyValue::Kind::Tuple)
    return formatError("'shape' must be a tuple, got " +
                       std::string(kindName(shape->kind)));
  for (size_t i = 0; i < shape->items.size(); ++i) {
    const PyValue &dim = shape->items[i];
    std::string where = "shape[" + std::to_string(i) + "]";
    if (dim.kind != PyValue::Kind::Int)
      return formatError(where + " is " + kindName(dim.kind) +
                         ", not an integer");
    std::optional<int64_t> value = toInt64(dim.text);
    if (!value || *value < 0)
      return formatError(where + " is " + dim.text +
                         "; dimensions must be non-negative 64-bit integers");
    header.shape.push_back(*value);
  }

  std::string typeText = "shape " + formatShape(header.shape) + " of " +
                         std::string(dtypeToShortName(header.dtype));
  std::optional<uint64_t> expected =
      checkedByteSize(header.dtype, header.shape);
  if (!expected)
    return formatError(typeText + " has a byte size that overflows 64 bits");
  header.dataOffset = prefix + static_cast<size_t>(headerSize);
  uint64_t available = size - header.dataOffset;
  if (available != *expected)
    return formatError(std::to_string(available) + " bytes of data, but " +
                       typeText + " needs " + std::to_string(*expected) +
                       (available < *expected
                            ? " (truncated)"
                            : " (trailing bytes are not allowed)"));
  header.dataSize = static_cast<size_t>(available);
  return true;
}

/// Turns the file's data order into NpyArray's: little-endian, C order.
void normalize(NpyArray &array, const Header &header) {
  size_t width = dtypeSize(array.dtype);
  if (header.swap)
    for (size_t at = 0; at + width <= array.data.size(); at += width)
      std::reverse(array.data.begin() + at, array.data.begin() + at + width);

  // Fortran order differs from C order only with two or more dimensions.
  const std::vector<int64_t> &shape = array.shape;
  if (!header.fortranOrder || shape.size() < 2 || array.data.empty())
    return;
  size_t rank = shape.size();
  // The Fortran (column-major) byte stride of each dimension.
  std::vector<size_t> stride(rank);
  stride[0] = width;
  for (size_t k = 1; k < rank; ++k)
    stride[k] = stride[k - 1] * static_cast<size_t>(shape[k - 1]);
  // Walk the elements in C order, tracking where each sits in the source.
  std::vector<uint8_t> out(array.data.size());
  std::vector<int64_t> index(rank, 0);
  size_t source = 0;
  for (size_t at = 0; at < out.size(); at += width) {
    std::memcpy(out.data() + at, array.data.data() + source, width);
    for (size_t k = rank; k-- > 0;) {
      source += stride[k];
      if (++index[k] < shape[k])
        break;
      source -= stride[k] * static_cast<size_t>(shape[k]);
      index[k] = 0;
    }
  }
  array.data = std::move(out);
}

/// Parses the .npy file in `buffer`, taking the buffer for the array's data.
bool decodeOwned(std::vector<uint8_t> &buffer, const std::string &what,
                 const ErrorSink &sink, NpyArray &array) {
  Header header;
  if (!parseHeader(buffer.data(), buffer.size(), what, sink, header))
    return false;
  array.dtype = header.dtype;
  array.shape = std::move(header.shape);
  array.data = std::move(buffer);
  // Moving the data down in place needs no second buffer.
  array.data.erase(array.data.begin(),
                   array.data.begin() +
                       static_cast<std::ptrdiff_t>(header.dataOffset));
  normalize(array, header);
  return true;
}

/// The Python repr of a shape tuple: "()", "(3,)", "(2, 3)".
std::string pythonShape(const std::vector<int64_t> &shape) {
  std::string out = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + (shape.size() == 1 ? ",)" : ")");
}

/// Checks `array` and builds the .npy bytes before its data, exactly as
/// np.save would. On failure sets `code` and `problem` (no path prefix).
bool encodeHeader(const NpyArray &array, std::vector<uint8_t> &out,
                  ErrorCode &code, std::string &problem) {
  code = ErrorCode::InvalidArgument;
  if (!isValidDType(array.dtype)) {
    problem =
        "invalid dtype value " + std::to_string(static_cast<int>(array.dtype));
    return false;
  }
  std::string descr = npyDescr(array.dtype);
  if (descr.empty()) {
    code = ErrorCode::Unsupported;
    problem = std::string(dtypeToShortName(array.dtype)) +
              " has no NumPy dtype; convert it (to f32, say) first";
    return false;
  }
  for (int64_t dim : array.shape) {
    if (dim < 0) {
      problem =
          "shape " + formatShape(array.shape) + " has a negative dimension";
      return false;
    }
  }
  std::string typeText = "shape " + formatShape(array.shape) + " of " +
                         std::string(dtypeToShortName(array.dtype));
  std::optional<uint64_t> expected = checkedByteSize(array.dtype, array.shape);
  if (!expected) {
    problem = typeText + " has a byte size that overflows 64 bits";
    return false;
  }
  if (*expected != array.data.size()) {
    problem = std::to_string(array.data.size()) + " bytes of data, but " +
              typeText + " needs " + std::to_string(*expected);
    return false;
  }

  std::string text =
      "{'descr': '" + descr +
      "', 'fortran_order': False, 'shape': " + pythonShape(array.shape) + ", }";
  // Room for the first dimension to grow in place, as np.save leaves it.
  if (!array.shape.empty())
    text.append(kGrowthAxisMaxDigits - std::to_string(array.shape[0]).size(),
                ' ');
  // Version 1.0 if its 16-bit length field can hold the padded header,
  // else 2.0. The padding (1 to 64 spaces, then '\n') aligns the data.
  size_t textSize = text.size() + 1;
  unsigned major = 1;
  size_t prefix = kMagicSize + 4;
  size_t padding = kArrayAlign - (prefix + textSize) % kArrayAlign;
  if (textSize + padding > 0xffff) {
    major = 2;
    prefix = kMagicSize + 6;
    padding = kArrayAlign - (prefix + textSize) % kArrayAlign;
  }
  uint64_t headerSize = textSize + padding;
  if (headerSize > kNpyMaxHeaderSize) {
    problem = "a shape of " + std::to_string(array.shape.size()) +
              " dimensions needs a header of " + std::to_string(headerSize) +
              " bytes, over the limit of " + std::to_string(kNpyMaxHeaderSize);
    return false;
  }
  out.assign(kMagic, kMagic + kMagicSize);
  out.push_back(static_cast<uint8_t>(major));
  out.push_back(0);
  for (size_t i = 0; i < prefix - kMagicSize - 2; ++i)
    out.push_back(static_cast<uint8_t>(headerSize >> (8 * i)));
  out.insert(out.end(), text.begin(), text.end());
  out.insert(out.end(), padding, ' ');
  out.push_back('\n');
  return true;
}

/// Reports an exception caught in a public function.
void reportException(const ErrorSink &sink, const std::string &what,
                     ErrorCode code) noexcept {
  try {
    throw;
  } catch (const std::bad_alloc &) {
    sink.outOfMemory(what);
  } catch (const std::exception &e) {
    // Only a bug could get here; still report rather than terminate.
    try {
      sink.set(code, what + ": " + e.what());
    } catch (...) {
      sink.outOfMemory(what);
    }
  } catch (...) {
    sink.set(code, std::string());
  }
}

} // namespace

std::string npyDescr(DType dtype) noexcept {
  for (const NpyType &type : kNpyTypes) {
    if (type.dtype != dtype)
      continue;
    // A void element has no byte order: NumPy writes '|V2'.
    char order = dtypeSize(dtype) == 1 || dtype == DType::BF16 ? '|' : '<';
    try {
      return order + std::string(type.code);
    } catch (...) {
      return std::string();
    }
  }
  return std::string();
}

std::optional<NpyArray> parseNpy(const uint8_t *bytes, size_t size,
                                 const std::string &what, std::string *error,
                                 ErrorCode *code) noexcept {
  ErrorSink sink{error, code};
  try {
    if (!bytes && size > 0) {
      sink.set(ErrorCode::InvalidArgument, what + ": null data");
      return std::nullopt;
    }
    static const uint8_t kEmpty = 0;
    if (!bytes)
      bytes = &kEmpty;
    Header header;
    if (!parseHeader(bytes, size, what, sink, header))
      return std::nullopt;
    NpyArray array;
    array.dtype = header.dtype;
    array.shape = std::move(header.shape);
    array.data.assign(bytes + header.dataOffset,
                      bytes + header.dataOffset + header.dataSize);
    normalize(array, header);
    sink.ok();
    return array;
  } catch (...) {
    reportException(sink, what, ErrorCode::Format);
  }
  return std::nullopt;
}

std::optional<NpyArray> readNpy(const std::string &path, std::string *error,
                                ErrorCode *code) noexcept {
  ErrorSink sink{error, code};
  try {
    std::vector<uint8_t> buffer;
    if (!detail::readWholeFile(path, buffer, sink))
      return std::nullopt;
    NpyArray array;
    if (!decodeOwned(buffer, path, sink, array))
      return std::nullopt;
    sink.ok();
    return array;
  } catch (...) {
    reportException(sink, path, ErrorCode::Format);
  }
  return std::nullopt;
}

std::optional<std::vector<uint8_t>>
encodeNpy(const NpyArray &array, std::string *error, ErrorCode *code) noexcept {
  ErrorSink sink{error, code};
  try {
    std::vector<uint8_t> out;
    ErrorCode failure;
    std::string problem;
    if (!encodeHeader(array, out, failure, problem)) {
      sink.set(failure, "npy: " + problem);
      return std::nullopt;
    }
    out.insert(out.end(), array.data.begin(), array.data.end());
    sink.ok();
    return out;
  } catch (...) {
    reportException(sink, "npy", ErrorCode::InvalidArgument);
  }
  return std::nullopt;
}

bool writeNpy(const std::string &path, const NpyArray &array,
              std::string *error, ErrorCode *code) noexcept {
  ErrorSink sink{error, code};
  try {
    if (path.empty()) {
      sink.set(ErrorCode::InvalidArgument, "npy writer: empty path");
      return false;
    }
    std::vector<uint8_t> header;
    ErrorCode failure;
    std::string problem;
    if (!encodeHeader(array, header, failure, problem)) {
      sink.set(failure, path + ": " + problem);
      return false;
    }
    // The data goes out from the caller's buffer, without a copy.
    std::vector<ByteSpan> pieces = {{header.data(), header.size()},
                                    {array.data.data(), array.data.size()}};
    if (!detail::writeFileAtomically(path, pieces, sink))
      return false;
    sink.ok();
    return true;
  } catch (...) {
    reportException(sink, path, ErrorCode::InvalidArgument);
  }
  return false;
}

std::optional<std::map<std::string, NpyArray>>
readNpz(const std::string &path, std::string *error, ErrorCode *code) noexcept {
  ErrorSink sink{error, code};
  try {
    std::vector<uint8_t> buffer;
    if (!detail::readWholeFile(path, buffer, sink))
      return std::nullopt;
    std::map<std::string, NpyArray> arrays;
    auto onMember = [&](const std::string &name, std::vector<uint8_t> &data) {
      std::string what = path + ": member " + quoteName(name);
      if (name.size() < kNpySuffix.size() ||
          name.compare(name.size() - kNpySuffix.size(), kNpySuffix.size(),
                       kNpySuffix) != 0) {
        sink.set(ErrorCode::Unsupported,
                 what + ": not a .npy file (.npz members must be named "
                        "'<key>.npy')");
        return false;
      }
      NpyArray array;
      if (!decodeOwned(data, what, sink, array))
        return false;
      arrays.emplace(name.substr(0, name.size() - kNpySuffix.size()),
                     std::move(array));
      return true;
    };
    if (!detail::readZip(buffer.data(), buffer.size(), path, sink, onMember))
      return std::nullopt;
    sink.ok();
    return arrays;
  } catch (...) {
    reportException(sink, path, ErrorCode::Format);
  }
  return std::nullopt;
}

bool writeNpz(const std::string &path,
              const std::map<std::string, NpyArray> &arrays, std::string *error,
              ErrorCode *code) noexcept {
  ErrorSink sink{error, code};
  try {
    if (path.empty()) {
      sink.set(ErrorCode::InvalidArgument, "npz writer: empty path");
      return false;
    }
    std::vector<std::vector<uint8_t>> headers;
    headers.reserve(arrays.size());
    std::vector<detail::ZipInput> members;
    members.reserve(arrays.size());
    for (const auto &[key, array] : arrays) {
      std::string where = path + ": array " + quoteName(key) + ": ";
      if (!isValidUtf8(key) || key.find('\0') != std::string::npos) {
        sink.set(ErrorCode::InvalidArgument,
                 where + "the key must be UTF-8 without NUL bytes");
        return false;
      }
      if (key.size() > 0xffff - kNpySuffix.size()) {
        sink.set(ErrorCode::InvalidArgument,
                 where + "the key is longer than 65531 bytes");
        return false;
      }
      std::vector<uint8_t> &header = headers.emplace_back();
      ErrorCode failure;
      std::string problem;
      if (!encodeHeader(array, header, failure, problem)) {
        sink.set(failure, where + problem);
        return false;
      }
      members.push_back({key + std::string(kNpySuffix),
                         {{header.data(), header.size()},
                          {array.data.data(), array.data.size()}}});
    }
    detail::ZipImage image = detail::buildStoredZip(members);
    if (!detail::writeFileAtomically(path, image.pieces, sink))
      return false;
    sink.ok();
    return true;
  } catch (...) {
    reportException(sink, path, ErrorCode::InvalidArgument);
  }
  return false;
}

} // namespace loomrt
