//===- PipelineTest.cpp - Pipelined steps equal the unpipelined step ------===//
//
// The equivalence bar of pipeline parallelism: a tiny GPT-2 (tied
// embedding: its gradient is summed over the first and last stage) and a
// tiny Llama (grouped-query attention), cut by --loom-pipeline and
// --loom-split-stages, sharded inside the stages or not, run by the
// pipeline interpreter (every rank's schedule, transfers, accumulation over
// micro-batches) and compared with the unpipelined @train_step in float64:
// the loss and every updated parameter and moment within a relative 1e-9
// (the tolerance of the partition tests; sums over micro-batches reorder
// additions, nothing more).
//
//===----------------------------------------------------------------------===//

#include "PartitionTestSupport.h"

#include "loom/Interpreter/Pipeline.h"
#include "loom/Schedule/ScheduleAttr.h"

#include "passes/Pipeline/Passes.h"

namespace loom::unittest {
namespace {

using loom::interp::NamedTensors;

struct PipelineCase {
  int64_t stages = 2, microBatches = 2, virtualStages = 1;
  std::string schedule = "1f1b";
  std::string recompute = "none";
  bool decomposeAttention = false;
  /// Sharding inside every stage (its mesh is each stage's grid).
  std::optional<Scheme> scheme;
};

class PipelineTest : public PartitionFixture {
protected:
  /// Builds the pipelined module of `json` and checks it against the
  /// unpipelined step; returns the pipelined module for further checks.
  OwningOpRef<ModuleOp> check(llvm::StringRef json, const PipelineCase &c) {
    OwningOpRef<ModuleOp> original = build(json, c.decomposeAttention,
                                           /*inlineCalls=*/false);
    EXPECT_TRUE(original);
    if (!original)
      return nullptr;

    OwningOpRef<ModuleOp> reference = original->clone();
    PassManager inlinePm(&context);
    inlinePm.addPass(createInlinerPass());
    EXPECT_TRUE(succeeded(inlinePm.run(*reference)));
    auto step = reference->lookupSymbol<func::FuncOp>("train_step");
    std::vector<Tensor> args = randomArgs(step);
    auto expected = loom::interp::run(step, args, Precision::F64);
    EXPECT_TRUE(static_cast<bool>(expected))
        << llvm::toString(expected.takeError());
    if (!expected)
      return nullptr;
    NamedTensors inputs;
    for (unsigned i = 0; i < step.getNumArguments(); ++i)
      inputs[loom::interp::stepKey(step.getArgAttrDict(i))] = args[i];

    OwningOpRef<ModuleOp> piped = original->clone();
    PassManager pm(&context);
    loom::LoomPipelineOptions options;
    options.stages = c.stages;
    options.microBatches = c.microBatches;
    options.virtualStages = c.virtualStages;
    options.schedule = c.schedule;
    options.recompute = c.recompute;
    pm.addPass(loom::createLoomPipeline(options));
    pm.addPass(createInlinerPass());
    EXPECT_TRUE(succeeded(pm.run(*piped))) << "--loom-pipeline failed";
    if (c.scheme)
      piped = partition(*piped, *c.scheme);
    // LOOM_PIPELINE_TEST_DUMP=DIR keeps each test's module before the split
    // (DIR/<test>.mlir), to look at a plan that fails.
    if (const char *dir = std::getenv("LOOM_PIPELINE_TEST_DUMP")) {
      std::string path =
          std::string(dir) + "/" +
          ::testing::UnitTest::GetInstance()->current_test_info()->name() +
          ".mlir";
      std::error_code ec;
      llvm::raw_fd_ostream os(path, ec);
      piped->print(os);
    }
    PassManager split(&context);
    split.addPass(loom::createLoomSplitStages());
    EXPECT_TRUE(succeeded(split.run(*piped))) << "--loom-split-stages failed";

    loom::interp::PipelineRunStats &stats = lastStats;
    auto got =
        loom::interp::runPipelineStep(*piped, inputs, Precision::F64, &stats);
    EXPECT_TRUE(static_cast<bool>(got)) << llvm::toString(got.takeError());
    if (!got)
      return nullptr;
    if (c.stages > 1)
      EXPECT_GT(stats.transfers, 0);

    EXPECT_EQ(got->size(), step.getNumResults());
    for (unsigned r = 0; r < step.getNumResults(); ++r) {
      std::string key = loom::interp::stepKey(step.getResultAttrDict(r));
      auto it = got->find(key);
      EXPECT_TRUE(it != got->end()) << "no result " << key;
      if (it == got->end())
        continue;
      const Tensor &want = (*expected)[r];
      EXPECT_EQ(it->second.shape(), want.shape()) << key;
      if (it->second.shape() != want.shape())
        continue;
      double scale = 0, error = 0;
      for (size_t k = 0; k < want.f().size(); ++k) {
        scale = std::max(scale, std::abs(want.f()[k]));
        error = std::max(error, std::abs(want.f()[k] - it->second.f()[k]));
      }
      EXPECT_LE(error, kPartitionTolerance * std::max(scale, 1e-30))
          << key << ": max error " << error << " at scale " << scale;
    }
    return piped;
  }

  /// The statistics of the last check's pipelined run.
  loom::interp::PipelineRunStats lastStats;

  static int64_t countFunctions(ModuleOp module, llvm::StringRef kind) {
    int64_t n = 0;
    for (auto fn : module.getOps<func::FuncOp>())
      if (auto attr = fn->getAttrOfType<DictionaryAttr>("loom.stage_function"))
        n += attr.getAs<StringAttr>("kind").getValue() == kind;
    return n;
  }
};

/// Data parallelism over a stage grid of 2.
Scheme dp2() {
  return {"2", [](llvm::StringRef role, llvm::StringRef, auto shape) {
            return dataParallel(role, shape, 0);
          }};
}

TEST_F(PipelineTest, Gpt2OneFOneB) {
  auto module = check(gpt2Json(), {});
  ASSERT_TRUE(module);
  EXPECT_EQ(countFunctions(*module, "forward"), 2);
  EXPECT_EQ(countFunctions(*module, "backward"), 2);
  EXPECT_EQ(countFunctions(*module, "optimizer"), 2);
  EXPECT_FALSE(module->lookupSymbol("train_step"));
  // The tied embedding: both stages update it from the summed gradient.
  int64_t tied = 0;
  module->walk([&](func::FuncOp fn) {
    for (unsigned i = 0; i < fn.getNumArguments(); ++i)
      tied += static_cast<bool>(fn.getArgAttr(i, "loom.tied_stages"));
  });
  EXPECT_EQ(tied, 2);
  auto schedule =
      loom::sched::scheduleFromAttr((*module)->getAttr("loom.schedule"));
  ASSERT_TRUE(static_cast<bool>(schedule))
      << llvm::toString(schedule.takeError());
  EXPECT_EQ(schedule->numRanks, 2);
  EXPECT_EQ(schedule->numMicroBatches, 2);
}

TEST_F(PipelineTest, LlamaOneFOneB) { EXPECT_TRUE(check(llamaJson(), {})); }

TEST_F(PipelineTest, Gpt2FourMicroBatches) {
  PipelineCase c;
  c.microBatches = 4;
  EXPECT_TRUE(check(gpt2Json(), c));
}

TEST_F(PipelineTest, Gpt2TimesTensorParallel) {
  PipelineCase c;
  c.scheme = tp(2);
  auto module = check(gpt2Json(), c);
  ASSERT_TRUE(module);
  // Megatron's all-reduces run inside the stage functions.
  int64_t reduces = 0;
  module->walk([&](shard::AllReduceOp) { ++reduces; });
  EXPECT_GT(reduces, 0);
}

TEST_F(PipelineTest, LlamaTimesTensorParallel) {
  PipelineCase c;
  c.scheme = tp(2);
  EXPECT_TRUE(check(llamaJson(), c));
}

TEST_F(PipelineTest, Gpt2TimesDataParallel) {
  PipelineCase c;
  c.scheme = dp2();
  auto module = check(gpt2Json(), c);
  ASSERT_TRUE(module);
  // The data-parallel gradient reduction is in the optimizer functions,
  // once per step, not in every micro-batch's backward.
  module->walk([&](func::FuncOp fn) {
    auto attr = fn->getAttrOfType<DictionaryAttr>("loom.stage_function");
    if (!attr || attr.getAs<StringAttr>("kind").getValue() != "backward")
      return;
    fn.walk([&](shard::AllReduceOp op) {
      ADD_FAILURE() << "all-reduce in @" << fn.getSymName().str();
    });
  });
}

TEST_F(PipelineTest, LlamaTimesDataParallel) {
  PipelineCase c;
  c.scheme = dp2();
  EXPECT_TRUE(check(llamaJson(), c));
}

TEST_F(PipelineTest, Gpt2Interleaved) {
  PipelineCase c;
  c.schedule = "interleaved-1f1b";
  c.virtualStages = 2;
  auto module = check(gpt2Json(), c);
  ASSERT_TRUE(module);
  EXPECT_EQ(countFunctions(*module, "forward"), 4);
}

TEST_F(PipelineTest, LlamaInterleaved) {
  PipelineCase c;
  c.schedule = "interleaved-1f1b";
  c.virtualStages = 2;
  c.microBatches = 4;
  EXPECT_TRUE(check(llamaJson(), c));
}

TEST_F(PipelineTest, Gpt2GPipe) {
  PipelineCase c;
  c.schedule = "gpipe";
  EXPECT_TRUE(check(gpt2Json(), c));
}

/// What the schedules keep in flight, as executed: GPipe holds every
/// micro-batch's saved values on both ranks before the first backward,
/// 1F1B at most P - r on rank r (2 + 1), whatever the micro-batches.
TEST_F(PipelineTest, SavedValuesInFlight) {
  PipelineCase c;
  c.microBatches = 4;
  c.schedule = "gpipe";
  ASSERT_TRUE(check(gpt2Json(), c));
  EXPECT_EQ(lastStats.peakSavedSets, 8);
  c.schedule = "1f1b";
  ASSERT_TRUE(check(gpt2Json(), c));
  EXPECT_LE(lastStats.peakSavedSets, 3);
  // Per rank: 4 forwards, 4 backwards, 4 activation and 4 gradient
  // transfers, the reduction and the optimizer.
  EXPECT_EQ(lastStats.instructions, 2 * (4 * 4 + 2));
}

TEST_F(PipelineTest, ZeroBubbleSplitsTheBackward) {
  PipelineCase c;
  c.schedule = "zb-h1";
  c.microBatches = 4;
  auto module = check(llamaJson(), c);
  ASSERT_TRUE(module);
  EXPECT_EQ(countFunctions(*module, "backward"), 0);
  EXPECT_EQ(countFunctions(*module, "backward_input"), 2);
  EXPECT_EQ(countFunctions(*module, "backward_weight"), 2);
  // W holds the weight gradients: the last stage's W has matmuls.
  auto weight = module->lookupSymbol<func::FuncOp>("stage1_backward_weight");
  ASSERT_TRUE(weight);
  int64_t matmuls = 0;
  weight.walk([&](loom::MatmulOp) { ++matmuls; });
  EXPECT_GT(matmuls, 0);
}

/// Full recomputation saves nothing but the stage's inputs; the backward
/// recomputes the forward.
TEST_F(PipelineTest, FullRecomputation) {
  PipelineCase c;
  c.recompute = "full";
  auto module = check(gpt2Json(), c);
  ASSERT_TRUE(module);
  auto forward = module->lookupSymbol<func::FuncOp>("stage1_forward");
  ASSERT_TRUE(forward);
  int64_t saved = 0;
  for (unsigned r = 0; r < forward.getNumResults(); ++r) {
    auto role = forward.getResultAttrOfType<StringAttr>(r, "loom.role");
    saved += role && role.getValue() == "saved";
  }
  EXPECT_EQ(saved, 1); // the activation it received
}

/// Selective recomputation (decomposed attention) recomputes the attention
/// core: fewer values saved than without recomputation.
TEST_F(PipelineTest, SelectiveRecomputation) {
  auto savedOf = [&](const std::string &mode) -> int64_t {
    PipelineCase c;
    c.recompute = mode;
    c.decomposeAttention = true;
    auto module = check(gpt2Json(), c);
    if (!module)
      return -1;
    int64_t saved = 0;
    for (auto fn : module->getOps<func::FuncOp>())
      for (unsigned r = 0; r < fn.getNumResults(); ++r) {
        auto role = fn.getResultAttrOfType<StringAttr>(r, "loom.role");
        saved += role && role.getValue() == "saved";
      }
    return saved;
  };
  int64_t none = savedOf("none"), selective = savedOf("selective");
  EXPECT_GT(none, 0);
  EXPECT_LT(selective, none);
}

/// Whatever the sharding planner picks inside the stages when compute is
/// all that costs (every collective kind, layouts no scheme names): the
/// cut must still place each inserted collective where its values live.
TEST_F(PipelineTest, Gpt2TimesComputeBoundSharding) {
  PipelineCase c;
  c.scheme = computeBound("2x2");
  EXPECT_TRUE(check(gpt2Json(), c));
}

TEST_F(PipelineTest, LlamaTimesComputeBoundSharding) {
  PipelineCase c;
  c.scheme = computeBound("4");
  c.schedule = "zb-h1";
  EXPECT_TRUE(check(llamaJson(), c));
}

/// Everything at once: dropout everywhere, four micro-batches, interleaved
/// stages, selective recomputation of the decomposed attention, and the
/// planner's own sharding inside the stages.
TEST_F(PipelineTest, Gpt2EverythingAtOnce) {
  PipelineCase c;
  c.schedule = "interleaved-1f1b";
  c.virtualStages = 2;
  c.microBatches = 4;
  c.recompute = "selective";
  c.decomposeAttention = true;
  c.scheme = computeBound("2");
  EXPECT_TRUE(check(gpt2Json(0.1), c));
}

/// Three dimensions at once: two stages, each on a 2 x 2 grid of data x
/// tensor parallelism (Megatron's layouts on the tensor axis), i.e. eight
/// devices, with dropout.
TEST_F(PipelineTest, Gpt2DataTensorPipeline) {
  PipelineCase c;
  c.scheme = dp2tp2();
  EXPECT_TRUE(check(gpt2Json(0.1), c));
}

/// ZeRO-3 inside the stages: parameters and moments split over the data
/// axis, gathered for the forward and backward of every micro-batch.
TEST_F(PipelineTest, LlamaZero3) {
  PipelineCase c;
  c.scheme = zero(3);
  c.microBatches = 1;
  EXPECT_TRUE(check(llamaJson(), c));
}

/// Tensor parallelism with sequence parallelism inside the stages.
TEST_F(PipelineTest, Gpt2SequenceParallel) {
  PipelineCase c;
  c.scheme = tpSequenceParallel();
  EXPECT_TRUE(check(gpt2Json(0.1), c));
}

/// Dropout everywhere (GPT-2: embeddings, residual branches, attention):
/// micro-batch k draws the masks of its rows of the whole batch, so the
/// pipelined step equals the unpipelined one, also with the batch split
/// over a data-parallel grid inside each stage.
TEST_F(PipelineTest, Gpt2DropoutOverMicroBatches) {
  PipelineCase c;
  c.microBatches = 4;
  auto module = check(gpt2Json(0.1), c);
  ASSERT_TRUE(module);
  int64_t marked = 0;
  module->walk(
      [&](Operation *op) { marked += op->hasAttr("loom.mask_micro_batches"); });
  EXPECT_GT(marked, 0);
}

TEST_F(PipelineTest, Gpt2DropoutTimesDataParallel) {
  PipelineCase c;
  c.scheme = dp2();
  EXPECT_TRUE(check(gpt2Json(0.1), c));
}

TEST_F(PipelineTest, LlamaAttentionDropoutDecomposed) {
  PipelineCase c;
  c.decomposeAttention = true;
  c.recompute = "selective";
  EXPECT_TRUE(check(llamaJson(0.1), c));
}

TEST_F(PipelineTest, LlamaAttentionDropoutFused) {
  PipelineCase c;
  c.schedule = "zb-h1";
  EXPECT_TRUE(check(llamaJson(0.1), c));
}

/// The interpreter's errors: a missing input names it; a schedule whose
/// streams wait on each other is refused with every blocked rank.
TEST_F(PipelineTest, RunErrors) {
  auto module = check(gpt2Json(), {});
  ASSERT_TRUE(module);
  auto missing = loom::interp::runPipelineStep(*module, {}, Precision::F64);
  ASSERT_FALSE(static_cast<bool>(missing));
  EXPECT_NE(llvm::toString(missing.takeError()).find("no input 'param:"),
            std::string::npos);

  auto schedule =
      loom::sched::scheduleFromAttr((*module)->getAttr("loom.schedule"));
  ASSERT_TRUE(static_cast<bool>(schedule));
  // Rank 0 waits for a gradient before it sends its first activation.
  auto &stream = schedule->streams[0];
  auto recv = llvm::find_if(stream, [](const loom::sched::Instr &instr) {
    return instr.kind == loom::sched::InstrKind::RecvGradient;
  });
  ASSERT_NE(recv, stream.end());
  loom::sched::Instr moved = *recv;
  stream.erase(recv);
  stream.insert(stream.begin(), moved);
  (*module)->setAttr("loom.schedule",
                     loom::sched::scheduleToAttr(&context, *schedule));
  auto deadlocked = loom::interp::runPipelineStep(*module, {}, Precision::F64);
  ASSERT_FALSE(static_cast<bool>(deadlocked));
  std::string message = llvm::toString(deadlocked.takeError());
  EXPECT_NE(message.find("deadlock"), std::string::npos) << message;
  EXPECT_NE(message.find("rank 0"), std::string::npos) << message;
}

} // namespace
} // namespace loom::unittest
