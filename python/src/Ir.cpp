//===- Ir.cpp - Module, Operation and Value for passes written in Python --===//
//
// The classes of loom.passes.parse: a Module walks its ops; an Operation
// has a name, a location, attributes (printed text; set from text), its
// operands and results, and can be erased; a Value has a type (text), the
// op that defines it, its users, and can replace its uses. Module.create_op
// builds an op from its name, operands, result types and attributes and
// verifies it. Every handle keeps its module alive; a handle to an erased
// op, or one made before a pass pipeline ran on the module in place,
// raises ValueError. Errors of the IR (a verifier, unparsable text)
// raise loom.PassError with the diagnostics.
//
//===----------------------------------------------------------------------===//

#include "Ir.h"
#include "Module.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/raw_ostream.h"

#include <pybind11/stl.h>

namespace py = pybind11;
using loom::python::IrModule;

namespace {

using ModuleRef = std::shared_ptr<IrModule>;

/// Runs `body` with the module's diagnostics collected; raises
/// loom.PassError with them (or `what`) when it returns false.
template <typename Fn>
void diagnosed(IrModule &m, const std::string &what, Fn body) {
  std::string error;
  bool ok;
  {
    llvm::raw_string_ostream os(error);
    mlir::SourceMgrDiagnosticHandler handler(m.sourceMgr, m.context.get(), os);
    ok = body();
  }
  if (!ok)
    loom::python::raisePassError(error.empty() ? what : what + ": " + error);
}

template <typename T> std::string printed(T &&x) {
  std::string s;
  llvm::raw_string_ostream os(s);
  x.print(os);
  return s;
}

/// Raises ValueError if a handle made at `generation` to `op` (or to a
/// value `op` owns) may dangle: `op` was erased through Python, or a pass
/// pipeline has run on the module since.
void checkLive(const IrModule &m, unsigned generation, mlir::Operation *op,
               const char *what) {
  if (generation != m.generation)
    throw py::value_error(std::string("this ") + what +
                          " is from before a pass pipeline ran on the "
                          "module: walk() it again");
  if (m.erased.contains(op))
    throw py::value_error(std::string("this ") + what + " was erased");
}

struct PyOp {
  PyOp(ModuleRef module, mlir::Operation *op)
      : m(std::move(module)), op(op), generation(m->generation) {}

  ModuleRef m;
  mlir::Operation *op;
  unsigned generation;

  mlir::Operation *get() const {
    checkLive(*m, generation, op, "operation");
    return op;
  }
};

struct PyValue {
  PyValue(ModuleRef module, mlir::Value v, mlir::Operation *owner)
      : m(std::move(module)), v(v), owner(owner), generation(m->generation) {}

  ModuleRef m;
  mlir::Value v;
  /// The op that owns the value (its definer, or its block's parent).
  mlir::Operation *owner;
  unsigned generation;

  mlir::Value get() const {
    checkLive(*m, generation, owner, "value's operation");
    return v;
  }
};

PyValue valueOf(const ModuleRef &m, mlir::Value v) {
  mlir::Operation *owner = v.getDefiningOp();
  if (!owner)
    owner = mlir::cast<mlir::BlockArgument>(v).getOwner()->getParentOp();
  return {m, v, owner};
}

/// The handles of `values`.
std::vector<PyValue> valuesOf(const ModuleRef &m, mlir::ValueRange values) {
  std::vector<PyValue> vs;
  for (mlir::Value v : values)
    vs.push_back(valueOf(m, v));
  return vs;
}

std::vector<PyOp> walk(const ModuleRef &m) {
  std::vector<PyOp> ops;
  mlir::Operation *top = m->module->getOperation();
  top->walk<mlir::WalkOrder::PreOrder>([&](mlir::Operation *op) {
    if (op != top)
      ops.push_back({m, op});
  });
  return ops;
}

py::dict attributesOf(const PyOp &o) {
  py::dict d;
  for (mlir::NamedAttribute a : o.get()->getAttrDictionary())
    d[py::str(a.getName().str())] = printed(a.getValue());
  return d;
}

void setAttribute(const PyOp &o, const std::string &name,
                  const std::string &text) {
  mlir::Operation *op = o.get();
  diagnosed(*o.m, "cannot parse the attribute '" + text + "'", [&] {
    mlir::Attribute a = mlir::parseAttribute(text, o.m->context.get());
    if (a)
      op->setAttr(name, a);
    return static_cast<bool>(a);
  });
}

/// Erases the op and what it holds; its results must have no users.
void erase(const PyOp &o) {
  mlir::Operation *op = o.get();
  if (op == o.m->module->getOperation())
    throw py::value_error("the module cannot be erased");
  for (mlir::Value r : op->getResults())
    if (!r.use_empty())
      loom::python::raisePassError(
          "cannot erase '" + op->getName().getStringRef().str() +
          "': a result is still used (replace its uses first)");
  op->walk([&](mlir::Operation *nested) { o.m->erased.insert(nested); });
  op->erase();
}

void replaceAllUsesWith(const PyValue &from, const PyValue &to) {
  if (from.m != to.m)
    throw py::value_error("the values belong to different modules");
  mlir::Value a = from.get(), b = to.get();
  if (a.getType() != b.getType())
    loom::python::raisePassError("cannot replace a value of type " +
                                 printed(a.getType()) + " by one of type " +
                                 printed(b.getType()));
  a.replaceAllUsesWith(b);
}

std::vector<PyOp> usersOf(const PyValue &v) {
  std::vector<PyOp> users;
  llvm::SmallPtrSet<mlir::Operation *, 8> seen;
  for (mlir::Operation *user : v.get().getUsers())
    if (seen.insert(user).second)
      users.push_back({v.m, user});
  return users;
}

/// A new op `name` before `before`, verified (it is erased again and the
/// verifier's message raised if it fails).
PyOp createOp(const ModuleRef &m, const std::string &name,
              const std::vector<PyValue> &operands,
              const std::vector<std::string> &resultTypes,
              const std::map<std::string, std::string> &attributes,
              const PyOp &before) {
  mlir::Operation *at = before.get();
  mlir::MLIRContext *ctx = m->context.get();
  PyOp created{m, nullptr};
  diagnosed(*m, "cannot create '" + name + "'", [&] {
    if (!mlir::RegisteredOperationName::lookup(name, ctx)) {
      mlir::emitError(at->getLoc()) << "no operation named '" << name << "'";
      return false;
    }
    mlir::OperationState state(at->getLoc(), name);
    for (const PyValue &v : operands)
      state.addOperands(v.get());
    for (const std::string &t : resultTypes) {
      mlir::Type type = mlir::parseType(t, ctx);
      if (!type)
        return false;
      state.addTypes(type);
    }
    for (const auto &[key, text] : attributes) {
      mlir::Attribute a = mlir::parseAttribute(text, ctx);
      if (!a)
        return false;
      state.addAttribute(key, a);
    }
    mlir::OpBuilder b(at);
    mlir::Operation *op = b.create(state);
    if (mlir::failed(mlir::verify(op))) {
      op->erase();
      return false;
    }
    // A new op may take the address of one erased before.
    m->erased.erase(op);
    created.op = op;
    return true;
  });
  return created;
}

} // namespace

void loom::python::registerIr(py::module_ &m) {
  py::class_<IrModule, ModuleRef>(m, "Module",
                                  "IR parsed by loom.passes.parse.")
      .def("walk", &walk,
           "Every operation inside the module, outer ones first, in order.")
      .def(
          "verify",
          [](const ModuleRef &self) {
            diagnosed(*self, "the module does not verify", [&] {
              return mlir::succeeded(mlir::verify(*self->module));
            });
          },
          "Raises loom.PassError if the module does not verify.")
      .def("create_op", &createOp, py::arg("name"),
           py::arg("operands") = std::vector<PyValue>{},
           py::arg("result_types") = std::vector<std::string>{},
           py::arg("attributes") = std::map<std::string, std::string>{},
           py::kw_only(), py::arg("before"),
           "A new, verified operation `name` before the operation `before`; "
           "types and attributes as text.")
      .def("__str__",
           [](const ModuleRef &self) { return printed(*self->module); });

  py::class_<PyOp>(m, "Operation", "An operation of a loom.passes Module.")
      .def_property_readonly(
          "name",
          [](const PyOp &o) { return o.get()->getName().getStringRef().str(); })
      .def_property_readonly(
          "location", [](const PyOp &o) { return printed(o.get()->getLoc()); })
      .def_property_readonly("attributes", &attributesOf,
                             "Name -> the attribute's text.")
      .def("set_attribute", &setAttribute, py::arg("name"), py::arg("text"))
      .def(
          "remove_attribute",
          [](const PyOp &o, const std::string &name) {
            o.get()->removeAttr(name);
          },
          py::arg("name"))
      .def_property_readonly("operands",
                             [](const PyOp &o) {
                               return valuesOf(o.m, o.get()->getOperands());
                             })
      .def_property_readonly("results",
                             [](const PyOp &o) {
                               return valuesOf(o.m, o.get()->getResults());
                             })
      .def_property_readonly("parent",
                             [](const PyOp &o) -> std::optional<PyOp> {
                               mlir::Operation *p = o.get()->getParentOp();
                               if (!p || p == o.m->module->getOperation())
                                 return std::nullopt;
                               return PyOp{o.m, p};
                             })
      .def("erase", &erase,
           "Erases the operation (and those inside it); its results must "
           "have no users.")
      .def("__eq__",
           [](const PyOp &a, const PyOp &b) { return a.op == b.op; })
      .def("__hash__",
           [](const PyOp &o) { return std::hash<void *>()(o.op); })
      .def("__str__", [](const PyOp &o) { return printed(*o.get()); });

  py::class_<PyValue>(m, "Value", "An SSA value of a loom.passes Module.")
      .def_property_readonly(
          "type", [](const PyValue &v) { return printed(v.get().getType()); })
      .def_property_readonly("owner",
                             [](const PyValue &v) -> std::optional<PyOp> {
                               mlir::Operation *def = v.get().getDefiningOp();
                               if (!def)
                                 return std::nullopt;
                               return PyOp{v.m, def};
                             },
                             "The defining operation; None for a block "
                             "argument.")
      .def_property_readonly("users", &usersOf)
      .def("replace_all_uses_with", &replaceAllUsesWith, py::arg("other"))
      .def("__eq__", [](const PyValue &a, const PyValue &b) {
        return a.v == b.v;
      })
      .def("__hash__", [](const PyValue &v) {
        return std::hash<void *>()(v.v.getAsOpaquePointer());
      });
}
