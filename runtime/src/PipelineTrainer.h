//===- PipelineTrainer.h - train() for a plan with a pipeline ---*- C++ -*-===//
//
// Pipeline parallelism on the runtime's side (docs/pipeline.md, "Running"):
// every rank runs, each step, the action list of its coordinate on the
// plan's pipeline axis, moving activations and their gradients to the
// neighbouring stages' ranks point to point. train() (Trainer.cpp) hands a
// plan with a `pipeline` here. Internal to libloomrt.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_SRC_PIPELINETRAINER_H
#define LOOMRT_SRC_PIPELINETRAINER_H

#include "loomrt/Artifact.h"
#include "loomrt/Trainer.h"

namespace loomrt::training {

/// Trains `artifact` (whose plan has a pipeline) as `options` say; fails by
/// throwing TrainError (TrainerSupport.h).
void trainPipeline(Artifact &artifact, const TrainOptions &options,
                   TrainResult &result);

} // namespace loomrt::training

#endif // LOOMRT_SRC_PIPELINETRAINER_H
