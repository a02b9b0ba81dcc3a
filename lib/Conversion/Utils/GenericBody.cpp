//===- GenericBody.cpp - A linalg.generic's body, inlined -----------------===//

#include "loom/Conversion/Utils/GenericBody.h"

using namespace mlir;

SmallVector<Value> loom::inlineGenericBody(OpBuilder &b, linalg::GenericOp op,
                                           IRMapping &map, ValueRange ivs) {
  Block *body = op.getBody();
  for (Operation &inner : body->without_terminator()) {
    if (auto idx = dyn_cast<linalg::IndexOp>(inner)) {
      map.map(idx.getResult(), ivs[idx.getDim()]);
      continue;
    }
    b.clone(inner, map);
  }
  SmallVector<Value> yields;
  for (Value v : body->getTerminator()->getOperands())
    yields.push_back(map.lookupOrDefault(v));
  return yields;
}
