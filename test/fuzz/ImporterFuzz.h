//===- ImporterFuzz.h - One run of an importer under the fuzzer -*- C++ -*-===//
//
// Shared by the ONNX and JSON harnesses: a fresh MLIRContext per run (no
// uniqued type, attribute or location survives into the next run), threads
// off (no thread pool per run), every diagnostic swallowed, and the result
// checked: a module comes back verified, with one parameter value of the
// right byte size per `loom.param` argument; a failure comes back as a null
// module (never an abort).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TEST_FUZZ_IMPORTERFUZZ_H
#define LOOM_TEST_FUZZ_IMPORTERFUZZ_H

#include "FuzzSupport.h"

#include "loom/Import/Import.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringSet.h"

#include <functional>

namespace loomfuzz {

using ImportFn = std::function<mlir::OwningOpRef<mlir::ModuleOp>(
    llvm::StringRef path, mlir::MLIRContext &context,
    loom::ParameterStore &params)>;

/// Writes the input to `<dir>/<fileName>`, imports it with `import` and
/// checks the result; `keep` names files the harness set up in the
/// directory once.
inline void runImporter(const uint8_t *data, size_t size, const char *fileName,
                        const ImportFn &import,
                        const std::vector<std::string> &keep = {}) {
  TempDir &dir = TempDir::get();
  int fdBefore = lowestFreeFd();
  std::string path = dir.write(fileName, data, size);
  {
    mlir::MLIRContext context(mlir::MLIRContext::Threading::DISABLED);
    mlir::ScopedDiagnosticHandler silence(
        &context, [](mlir::Diagnostic &) { return mlir::success(); });
    loom::ParameterStore params;
    mlir::OwningOpRef<mlir::ModuleOp> module = import(path, context, params);
    if (module) {
      if (mlir::failed(mlir::verify(*module)))
        fail("the importer returned a module that does not verify");
      // Every parameter argument has exactly one value of its type's size.
      llvm::StringMap<const loom::ParameterTensor *> values;
      for (const loom::ParameterTensor &t : params.getTensors()) {
        if (!values.try_emplace(t.name, &t).second)
          fail("the importer stored two values for one parameter");
        int64_t bits = t.type.getElementTypeBitWidth();
        uint64_t bytes = static_cast<uint64_t>(t.type.getNumElements()) *
                         static_cast<uint64_t>((bits + 7) / 8);
        if (t.data.size() != bytes)
          fail("a parameter's bytes do not match its type");
      }
      size_t marked = 0;
      module->walk([&](mlir::func::FuncOp func) {
        for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i) {
          auto name = func.getArgAttrOfType<mlir::StringAttr>(
              i, loom::kParamAttr);
          if (!name)
            continue;
          ++marked;
          auto it = values.find(name.getValue());
          if (it == values.end())
            fail("a loom.param argument has no value");
          if (it->second->type != func.getArgument(i).getType())
            fail("a loom.param argument's type differs from its value's");
        }
      });
      if (marked != values.size())
        fail("the importer stored a value for no loom.param argument");
    }
  }
  dir.removeInput(fileName, keep);
  checkNoFdLeak(fdBefore);
}

} // namespace loomfuzz

#endif // LOOM_TEST_FUZZ_IMPORTERFUZZ_H
