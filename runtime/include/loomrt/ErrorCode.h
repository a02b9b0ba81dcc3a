//===- ErrorCode.h - Machine-readable error classes for the C++ API -------===//
//
// C++ entry points report failures as a message (std::string *error) plus,
// where a caller wants to branch on it, one of these codes. The values equal
// the C API's loomrt_status so the two map one to one.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_ERRORCODE_H
#define LOOMRT_ERRORCODE_H

namespace loomrt {

enum class ErrorCode : int {
  Ok = 0,
  InvalidArgument, ///< The caller passed something unusable.
  IO,              ///< The operating system refused (open, read, write, ...).
  Format,          ///< A file was read but is malformed.
  Unsupported,     ///< Well formed, but uses something Loom does not handle.
  NoDevice,        ///< The requested device or driver is not available.
  OutOfMemory,     ///< An allocation failed.
  NonFinite,       ///< A step wrote inf or NaN (LoadOptions::checkNumerics).
  Cancelled,       ///< The caller asked to stop (TrainOptions::onMetrics).
};

} // namespace loomrt

#endif // LOOMRT_ERRORCODE_H
