//===- PartitionTestSupport.h - Shared helpers of the partition tests -----===//
//
// The fixture of the partitioned-equals-unpartitioned tests
// (PartitionDropoutTest.cpp): build a tiny model's @train_step, pin a
// parallelism scheme's layouts on its arguments, plan (--loom-auto-shard),
// partition (--loom-partition), run every rank with the multi-rank
// interpreter and compare with the unpartitioned step in float64.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TEST_UNIT_PARTITIONTESTSUPPORT_H
#define LOOM_TEST_UNIT_PARTITIONTESTSUPPORT_H

#include "TestModels.h"

#include "loom/AutoShard/Sharding.h"
#include "loom/CostModel/ClusterSpec.h"
#include "loom/Import/ModelConfig.h"
#include "loom/Import/ModelImporter.h"
#include "loom/Interpreter/Interpreter.h"
#include "loom/Interpreter/MultiRank.h"

#include "dialects/Loom/LoomDialect.h"
#include "dialects/Loom/LoomOps.h"
#include "passes/Autodiff/Passes.h"
#include "passes/Optimizer/Passes.h"
#include "passes/Sharding/Passes.h"
#include "passes/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/Extensions/InlinerExtension.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <random>

namespace loom::unittest {

using namespace mlir;
using loom::interp::Precision;
using loom::interp::Tensor;

/// The layout pinned on one argument of @train_step: the mesh axes of each
/// dimension, or nothing to leave it to the planner.
using Pin = std::optional<std::vector<std::vector<int64_t>>>;
using PinFn = std::function<Pin(llvm::StringRef role, llvm::StringRef name,
                                llvm::ArrayRef<int64_t> shape)>;

/// A parallelism scheme: the mesh, and the pins that make the planner pick
/// it.
struct Scheme {
  std::string mesh;
  PinFn pin;
  /// Reduce gradients whole before the (split) optimizer step, as ZeRO-1
  /// does, instead of reduce-scattering them.
  bool wholeGradients = false;
  /// Plan on a device that computes at 1 MFLOP/s with free links, so that
  /// the solver splits everything it can (a stress test of the
  /// partitioner: every collective kind, layouts no scheme names).
  bool computeBound = false;
  /// --loom-auto-shard's context-axis (-1: none).
  int64_t contextAxis = -1;
};

inline constexpr double kPartitionTolerance = 1e-9;

/// A tiny GPT-2 (2 layers, width 32, 4 heads, vocabulary 64) with dropout
/// `dropout` at every site (embeddings, residual branches, attention).
inline std::string gpt2Json(double dropout = 0.0) {
  std::string p = std::to_string(dropout);
  return R"({"model_type": "gpt2", "n_layer": 2, "n_embd": 32, "n_head": 4,
             "n_positions": 16, "vocab_size": 64, "embd_pdrop": )" +
         p + R"(, "resid_pdrop": )" + p + R"(, "attn_pdrop": )" + p + "}";
}

/// A tiny Llama (grouped-query: 4 query heads, 2 key/value heads) with
/// attention dropout `attentionDropout` (its only dropout).
inline std::string llamaJson(double attentionDropout = 0.0) {
  return R"({"model_type": "llama", "num_hidden_layers": 2,
             "hidden_size": 32, "intermediate_size": 48,
             "num_attention_heads": 4, "num_key_value_heads": 2,
             "vocab_size": 64, "max_position_embeddings": 16,
             "rms_norm_eps": 1e-6, "tie_word_embeddings": false,
             "attention_dropout": )" +
         std::to_string(attentionDropout) + "}";
}

/// Megatron's tensor parallelism over mesh axis `axis`: attention and MLP
/// input projections split by output feature (columns), output projections
/// by input feature (rows). GPT-2's Conv1D weights are [in, out]; Llama's
/// Linear weights [out, in].
inline Pin megatron(llvm::StringRef name, llvm::ArrayRef<int64_t> shape,
                    int64_t axis) {
  if (shape.size() != 2)
    return std::nullopt;
  bool gpt2Column =
      name.ends_with("c_attn.weight") || name.ends_with("c_fc.weight");
  bool gpt2Row = name.ends_with("c_proj.weight");
  bool llamaColumn =
      name.ends_with("q_proj.weight") || name.ends_with("k_proj.weight") ||
      name.ends_with("v_proj.weight") || name.ends_with("gate_proj.weight") ||
      name.ends_with("up_proj.weight");
  bool llamaRow =
      name.ends_with("o_proj.weight") || name.ends_with("down_proj.weight");
  if (gpt2Column || llamaRow)
    return std::vector<std::vector<int64_t>>{{}, {axis}};
  if (gpt2Row || llamaColumn)
    return std::vector<std::vector<int64_t>>{{axis}, {}};
  return std::nullopt;
}

/// Dimension 0 split over `axis` when it divides, else replicated (ZeRO's
/// flat partitioning, by rows).
inline Pin rows(llvm::ArrayRef<int64_t> shape, int64_t axis, int64_t size) {
  std::vector<std::vector<int64_t>> pin(shape.size());
  if (!shape.empty() && shape[0] % size == 0)
    pin[0] = {axis};
  return pin;
}

inline Pin replicated(llvm::ArrayRef<int64_t> shape) {
  return std::vector<std::vector<int64_t>>(shape.size());
}

class PartitionFixture : public ::testing::Test {
protected:
  PartitionFixture() {
    DialectRegistry registry;
    func::registerInlinerExtension(registry);
    context.appendDialectRegistry(registry);
    context.loadDialect<loom::LoomDialect, func::FuncDialect,
                        arith::ArithDialect, shard::ShardDialect>();
  }

  /// @train_step of `json` (AdamW) for 4 sequences of 8 tokens, with
  /// @forward_backward inlined unless `inlineCalls` is false; with
  /// `decomposeAttention`, fused attention is first rewritten into unfused
  /// ops (--loom-decompose-attention).
  OwningOpRef<ModuleOp> build(llvm::StringRef json,
                              bool decomposeAttention = false,
                              bool inlineCalls = true) {
    auto config = loom::parseModelConfig(json, "test.json");
    EXPECT_TRUE(static_cast<bool>(config))
        << llvm::toString(config.takeError());
    if (!config)
      return nullptr;
    vocab = config->vocab;
    loom::ImportOptions options;
    options.microBatch = 4;
    options.seqLen = 8;
    auto module = loom::importModel(context, *config, options);
    EXPECT_TRUE(static_cast<bool>(module))
        << llvm::toString(module.takeError());
    if (!module)
      return nullptr;
    PassManager pm(&context);
    if (decomposeAttention)
      pm.addPass(loom::createLoomDecomposeAttention());
    pm.addPass(loom::createLoomAutodiff());
    loom::LoomOptimizerOptions adamw;
    adamw.lr = 1e-2;
    pm.addPass(loom::createLoomOptimizer(adamw));
    if (inlineCalls)
      pm.addPass(createInlinerPass());
    EXPECT_TRUE(succeeded(pm.run(**module)));
    return std::move(*module);
  }

  /// Parameters N(0, 0.5) (norm scales around 1), first moments N(0, 0.1),
  /// second moments U(0, 0.01), the step 3, tokens and labels below the
  /// vocabulary.
  std::vector<Tensor> randomArgs(func::FuncOp fn) {
    std::mt19937_64 rng(11);
    std::normal_distribution<double> normal(0.0, 1.0);
    std::uniform_real_distribution<double> uniform(0.0, 0.01);
    std::uniform_int_distribution<int64_t> token(0, vocab - 1);
    std::vector<Tensor> args;
    for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
      auto type = cast<RankedTensorType>(fn.getArgumentTypes()[i]);
      llvm::StringRef role = roleOf(fn, i);
      int64_t n = type.getNumElements();
      if (!isa<FloatType>(type.getElementType())) {
        std::vector<int64_t> values(n, 3);
        if (role == "data")
          for (int64_t &v : values)
            v = token(rng);
        args.push_back(Tensor::ints(type.getElementType(), type.getShape(),
                                    std::move(values)));
        continue;
      }
      std::vector<double> values(n);
      for (double &v : values) {
        if (role == "v")
          v = uniform(rng);
        else if (role == "m")
          v = 0.1 * normal(rng);
        else
          v = 0.5 * normal(rng) + (type.getRank() == 1 ? 1.0 : 0.0);
      }
      args.push_back(Tensor::floats(type.getElementType(), type.getShape(),
                                    std::move(values)));
    }
    return args;
  }

  static llvm::StringRef roleOf(func::FuncOp fn, unsigned arg) {
    auto role = fn.getArgAttrOfType<StringAttr>(arg, "loom.role");
    return role ? role.getValue() : "";
  }

  /// A cluster file of `devices` devices on one node, so that any mesh of
  /// that many devices matches it.
  std::string clusterFile(int64_t devices, bool computeBound) {
    loom::cost::ClusterSpec spec = loom::unittest::testCluster();
    spec.devicesPerNode = devices;
    spec.nicsPerNode = devices;
    // A slow device on fast links, so that splitting the work of these tiny
    // models pays, as it does for large models on real clusters.
    spec.device.peakFlopsFP32 = spec.device.peakFlopsTF32 = 1e9;
    spec.device.peakFlopsBF16 = spec.device.peakFlopsFP16 = 1e9;
    spec.device.memoryBandwidth = 1e9;
    spec.device.launchOverhead = 1e-7;
    spec.device.gemmHalfWork = 1;
    spec.intraNode = {"fast", 1e11, 1e-7};
    if (computeBound) {
      spec.device.peakFlopsFP32 = spec.device.peakFlopsTF32 = 1e6;
      spec.device.peakFlopsBF16 = spec.device.peakFlopsFP16 = 1e6;
      spec.device.memoryBandwidth = 1e6;
      spec.device.launchOverhead = 0;
      spec.device.gemmHalfWork = 1;
      spec.intraNode = {"free", 1e15, 1e-12};
    }
    llvm::SmallString<128> path;
    EXPECT_FALSE(
        llvm::sys::fs::createTemporaryFile("loom-cluster", "json", path));
    std::ofstream(path.c_str()) << loom::cost::printClusterSpec(spec);
    files.push_back(path.str().str());
    return path.str().str();
  }

  ~PartitionFixture() override {
    for (const std::string &file : files)
      llvm::sys::fs::remove(file);
  }

  /// Pins the scheme's layouts on @train_step's arguments, plans, partitions
  /// and returns the partitioned module.
  OwningOpRef<ModuleOp> partition(ModuleOp original, const Scheme &scheme) {
    OwningOpRef<ModuleOp> module = original.clone();
    auto fn = module->lookupSymbol<func::FuncOp>("train_step");
    Builder b(&context);
    for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
      auto name = fn.getArgAttrOfType<StringAttr>(i, "loom.name");
      auto type = cast<RankedTensorType>(fn.getArgumentTypes()[i]);
      Pin pin = scheme.pin(roleOf(fn, i), name ? name.getValue() : "",
                           type.getShape());
      if (!pin)
        continue;
      llvm::SmallVector<Attribute> dims;
      for (const auto &axes : *pin) {
        llvm::SmallVector<Attribute> entries;
        for (int64_t axis : axes)
          entries.push_back(b.getI64IntegerAttr(axis));
        dims.push_back(b.getArrayAttr(entries));
      }
      fn.setArgAttr(i, "loom.split_axes", b.getArrayAttr(dims));
    }
    int64_t devices = 1;
    llvm::SmallVector<llvm::StringRef> sizes;
    llvm::StringRef(scheme.mesh).split(sizes, 'x');
    for (llvm::StringRef size : sizes)
      devices *= std::stoll(size.str());
    PassManager pm(&context);
    loom::LoomAutoShardOptions shardOptions;
    shardOptions.funcName = "train_step";
    shardOptions.meshShape = scheme.mesh;
    shardOptions.contextAxis = scheme.contextAxis;
    // The cluster holds the whole job: every pipeline rank's grid.
    int64_t pipelineRanks = 1;
    if (auto pipeline =
            (*module)->getAttrOfType<DictionaryAttr>("loom.pipeline"))
      if (auto ranks = pipeline.getAs<IntegerAttr>("ranks"))
        pipelineRanks = ranks.getInt();
    shardOptions.clusterName =
        clusterFile(devices * pipelineRanks, scheme.computeBound);
    pm.addPass(loom::createLoomAutoShard(shardOptions));
    EXPECT_TRUE(succeeded(pm.run(*module))) << "auto-shard failed";
    if (scheme.wholeGradients)
      reduceGradientsWhole(module->lookupSymbol<func::FuncOp>("train_step"));
    PassManager partitionPm(&context);
    loom::LoomPartitionOptions partitionOptions;
    partitionOptions.funcName = "train_step";
    partitionPm.addPass(loom::createLoomPartition(partitionOptions));
    EXPECT_TRUE(succeeded(partitionPm.run(*module))) << "partition failed";
    return module;
  }

  /// ZeRO-1: every gradient an optimizer update reads is first made whole
  /// (a replicated annotation before the update's own), so the partitioner
  /// all-reduces it and slices, where it would otherwise reduce-scatter.
  void reduceGradientsWhole(func::FuncOp fn) {
    OpBuilder b(&context);
    fn.walk([&](loom::AdamWUpdateOp update) {
      Value grad = update.getGrad();
      auto type = cast<RankedTensorType>(grad.getType());
      auto own = grad.getDefiningOp<shard::ShardOp>();
      bool forUsers = own && own.getAnnotateForUsers();
      b.setInsertionPoint(forUsers ? own.getOperation()
                                   : update.getOperation());
      llvm::SmallVector<shard::GridAxesAttr> none(
          type.getRank(), shard::GridAxesAttr::get(&context, {}));
      auto replicated =
          shard::ShardingOp::create(b, update.getLoc(), "mesh", none);
      Value source = forUsers ? own.getSrc() : grad;
      auto whole = shard::ShardOp::create(
          b, update.getLoc(), source, replicated.getResult(), b.getUnitAttr());
      if (forUsers) {
        own.getSrcMutable().assign(whole.getResult());
        return;
      }
      // The update took the gradient as produced: back to that layout.
      b.setInsertionPoint(update);
      Value layout = own ? own.getSharding() : replicated.getResult();
      auto back = shard::ShardOp::create(b, update.getLoc(), whole.getResult(),
                                         layout, b.getUnitAttr());
      update.getGradMutable().assign(back.getResult());
    });
  }

  /// Counts the ops named `name` in @train_step.
  static int64_t count(ModuleOp module, llvm::StringRef name) {
    int64_t n = 0;
    module.lookupSymbol<func::FuncOp>("train_step").walk([&](Operation *op) {
      n += op->getName().getStringRef() == name;
    });
    return n;
  }

  /// Whether some argument of `role` is split over `axis`.
  static bool argSplit(ModuleOp module, llvm::StringRef role, int64_t axis) {
    auto fn = module.lookupSymbol<func::FuncOp>("train_step");
    for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
      if (roleOf(fn, i) != role)
        continue;
      auto split = fn.getArgAttrOfType<ArrayAttr>(i, "loom.split_axes");
      for (Attribute dim : split)
        for (Attribute entry : cast<ArrayAttr>(dim))
          if (cast<IntegerAttr>(entry).getInt() == axis)
            return true;
    }
    return false;
  }

  /// Runs the partitioned step on every rank and compares it with the
  /// unpartitioned one.
  void checkEquivalent(ModuleOp original, ModuleOp partitioned) {
    auto reference = original.lookupSymbol<func::FuncOp>("train_step");
    auto fn = partitioned.lookupSymbol<func::FuncOp>("train_step");
    auto grid = partitioned.lookupSymbol<shard::GridOp>("mesh");
    ASSERT_TRUE(reference && fn && grid);
    std::vector<Tensor> args = randomArgs(reference);
    auto expected = loom::interp::run(reference, args, Precision::F64);
    ASSERT_TRUE(static_cast<bool>(expected))
        << llvm::toString(expected.takeError());

    llvm::SmallVector<int64_t> gridShape(grid.getShape());
    int64_t ranks = 1;
    for (int64_t size : gridShape)
      ranks *= size;
    auto splitOf = loom::interp::splitAxesFromAttr;
    std::vector<std::vector<Tensor>> perRank(ranks);
    for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
      auto split =
          splitOf(fn.getArgAttrOfType<ArrayAttr>(i, "loom.split_axes"));
      for (int64_t rank = 0; rank < ranks; ++rank) {
        auto shard = loom::interp::shardOfRank(args[i], gridShape, split, rank);
        ASSERT_TRUE(static_cast<bool>(shard))
            << llvm::toString(shard.takeError());
        perRank[rank].push_back(std::move(*shard));
      }
    }
    auto results = loom::interp::runRanks(fn, grid, perRank, Precision::F64);
    ASSERT_TRUE(static_cast<bool>(results))
        << llvm::toString(results.takeError());
    ASSERT_EQ(fn.getNumResults(), expected->size());
    for (unsigned r = 0; r < fn.getNumResults(); ++r) {
      auto split =
          splitOf(fn.getResultAttrOfType<ArrayAttr>(r, "loom.split_axes"));
      std::vector<Tensor> shards;
      for (int64_t rank = 0; rank < ranks; ++rank)
        shards.push_back((*results)[rank][r]);
      auto global = loom::interp::assembleFromShards(shards, gridShape, split);
      ASSERT_TRUE(static_cast<bool>(global))
          << "result " << r << ": " << llvm::toString(global.takeError());
      const Tensor &want = (*expected)[r];
      ASSERT_EQ(global->shape(), want.shape()) << "result " << r;
      double scale = 0, error = 0;
      for (size_t k = 0; k < want.f().size(); ++k) {
        scale = std::max(scale, std::abs(want.f()[k]));
        error = std::max(error, std::abs(want.f()[k] - global->f()[k]));
      }
      auto name = fn.getResultAttrOfType<StringAttr>(r, "loom.name");
      EXPECT_LE(error, kPartitionTolerance * std::max(scale, 1e-30))
          << "result " << r << " (" << (name ? name.getValue().str() : "loss")
          << "): max error " << error << " at scale " << scale;
    }
  }

  void checkScheme(llvm::StringRef json, const Scheme &scheme,
                   const std::function<void(ModuleOp)> &checkPlan) {
    OwningOpRef<ModuleOp> original = build(json);
    ASSERT_TRUE(original);
    OwningOpRef<ModuleOp> partitioned = partition(*original, scheme);
    ASSERT_TRUE(partitioned);
    checkPlan(*partitioned);
    checkEquivalent(*original, *partitioned);
  }

  MLIRContext context;
  int64_t vocab = 0;
  std::vector<std::string> files;
};

//===----------------------------------------------------------------------===//
// Schemes
//===----------------------------------------------------------------------===//

/// Data parallelism over `axis` of size `size`: the batch split, every
/// parameter and moment replicated.
inline Pin dataParallel(llvm::StringRef role, llvm::ArrayRef<int64_t> shape,
                        int64_t axis) {
  if (role == "data")
    return std::vector<std::vector<int64_t>>{{axis}, {}};
  if (role == "param" || role == "m" || role == "v")
    return replicated(shape);
  return std::nullopt;
}

inline Scheme dp4() {
  return {"4", [](llvm::StringRef role, llvm::StringRef, auto shape) {
            return dataParallel(role, shape, 0);
          }};
}

inline Scheme tp(int64_t size) {
  return {std::to_string(size),
          [](llvm::StringRef role, llvm::StringRef name, auto shape) -> Pin {
            if (role == "data")
              return replicated(shape);
            if (role == "param" || role == "m" || role == "v")
              return megatron(name, shape, 0);
            return std::nullopt;
          }};
}

inline Scheme dp2tp2() {
  return {"2x2",
          [](llvm::StringRef role, llvm::StringRef name, auto shape) -> Pin {
            if (role == "data")
              return std::vector<std::vector<int64_t>>{{0}, {}};
            if (role == "param" || role == "m" || role == "v") {
              Pin pin = megatron(name, shape, 1);
              return pin ? pin : replicated(shape);
            }
            return std::nullopt;
          }};
}

/// ZeRO over a data axis of 4: optimizer moments split (stage 1 and 2,
/// which differ in how the gradient is reduced), and the parameters too
/// (stage 3).
inline Scheme zero(int stage) {
  Scheme scheme{
      "4", [stage](llvm::StringRef role, llvm::StringRef, auto shape) -> Pin {
        if (role == "data")
          return std::vector<std::vector<int64_t>>{{0}, {}};
        if (role == "m" || role == "v" || (role == "param" && stage == 3))
          return rows(shape, 0, 4);
        if (role == "param")
          return replicated(shape);
        return std::nullopt;
      }};
  scheme.wholeGradients = stage == 1;
  return scheme;
}

/// Megatron over 2 devices with the sequence split where the activations
/// are replicated (sequence parallelism): the tokens arrive split by
/// position.
inline Scheme tpSequenceParallel() {
  return {"2",
          [](llvm::StringRef role, llvm::StringRef name, auto shape) -> Pin {
            if (role == "data")
              return std::vector<std::vector<int64_t>>{{}, {0}};
            if (role == "param" || role == "m" || role == "v")
              return megatron(name, shape, 0);
            return std::nullopt;
          }};
}

/// Context parallelism over `devices`: the tokens split by position,
/// parameters and moments whole, mesh axis 0 the context-parallel axis,
/// planned where compute is what costs (the tiny models' kernels are
/// otherwise all launch overhead): the sequence stays split through every
/// layer, attention's keys and values gathered around the axis.
inline Scheme contextParallel(int64_t devices) {
  Scheme scheme{std::to_string(devices),
                [](llvm::StringRef role, llvm::StringRef, auto shape) -> Pin {
                  if (role == "data")
                    return std::vector<std::vector<int64_t>>{{}, {0}};
                  if (role == "param" || role == "m" || role == "v")
                    return replicated(shape);
                  return std::nullopt;
                }};
  scheme.computeBound = true;
  scheme.contextAxis = 0;
  return scheme;
}

/// Whatever the solver picks when compute is all that costs.
inline Scheme computeBound(std::string mesh) {
  Scheme scheme{std::move(mesh),
                [](llvm::StringRef, llvm::StringRef, auto) -> Pin {
                  return std::nullopt;
                }};
  scheme.computeBound = true;
  scheme.contextAxis = 0;
  return scheme;
}

} // namespace loom::unittest

#endif // LOOM_TEST_UNIT_PARTITIONTESTSUPPORT_H
