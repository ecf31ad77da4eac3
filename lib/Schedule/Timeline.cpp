//===- Timeline.cpp - Drawing a simulated pipeline step -------------------===//

#include "loom/Schedule/Timeline.h"
#include "loom/Support/AtomicFile.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <algorithm>
#include <cmath>

using namespace llvm;

namespace loom::sched {
namespace {

/// The trace category of an event, which is also its colour class.
StringRef categoryOf(InstrKind kind) {
  switch (kind) {
  case InstrKind::Forward:
    return "forward";
  case InstrKind::Backward:
  case InstrKind::BackwardInput:
    return "backward";
  case InstrKind::BackwardWeight:
    return "backward_weight";
  case InstrKind::Optimizer:
    return "optimizer";
  default:
    return "comm";
  }
}

std::string nameOf(const Simulation::Event &event) {
  auto tagged = [&](StringRef prefix) {
    return formatv("{0} s{1} mb{2}", prefix, event.stage, event.microBatch)
        .str();
  };
  switch (event.kind) {
  case InstrKind::Forward:
    return tagged("F");
  case InstrKind::Backward:
  case InstrKind::BackwardInput:
    return tagged("B");
  case InstrKind::BackwardWeight:
    return tagged("W");
  case InstrKind::RecvActivation:
    return tagged("recv act");
  case InstrKind::RecvGradient:
    return tagged("recv grad");
  case InstrKind::AllReduceGradients:
    return "all-reduce";
  case InstrKind::Optimizer:
    return "optimizer";
  default:
    return stringifyInstrKind(event.kind).str();
  }
}

json::Value traceOf(const Simulation &simulation) {
  json::Array events;
  events.push_back(json::Object{{"name", "process_name"},
                                {"ph", "M"},
                                {"pid", 0},
                                {"args", json::Object{{"name", "pipeline"}}}});
  for (int r = 0; r < simulation.numRanks; ++r)
    events.push_back(json::Object{
        {"name", "thread_name"},
        {"ph", "M"},
        {"pid", 0},
        {"tid", r},
        {"args", json::Object{{"name", formatv("device {0}", r)}}}});
  for (const Simulation::Event &event : simulation.events) {
    json::Object object{{"name", nameOf(event)},
                        {"cat", categoryOf(event.kind)},
                        {"ph", "X"},
                        {"pid", 0},
                        {"tid", event.rank},
                        {"ts", event.start * 1e6},
                        {"dur", (event.end - event.start) * 1e6}};
    if (event.stage >= 0)
      object["args"] = json::Object{{"stage", event.stage},
                                    {"micro_batch", event.microBatch}};
    events.push_back(std::move(object));
  }
  return json::Object{{"traceEvents", std::move(events)},
                      {"displayTimeUnit", "ms"}};
}

// SVG geometry, in pixels.
constexpr double kLeft = 84, kRight = 24, kTop = 44, kRowHeight = 30,
                 kRowGap = 8, kPlotWidth = 1000;

struct Colour {
  StringRef category, label, fill, text;
};
constexpr Colour kColours[] = {
    {"forward", "forward", "#4e79a7", "#ffffff"},
    {"backward", "backward", "#f28e2b", "#000000"},
    {"backward_weight", "weight gradient", "#59a14f", "#ffffff"},
    {"comm", "communication", "#b07aa1", "#ffffff"},
    {"optimizer", "optimizer", "#9c755f", "#ffffff"},
};
constexpr StringRef kIdle = "#e8e8e8";

const Colour &colourOf(const Simulation::Event &event) {
  StringRef category = categoryOf(event.kind);
  for (const Colour &colour : kColours)
    if (colour.category == category)
      return colour;
  return kColours[3];
}

/// A tick step of 1, 2 or 5 times a power of ten giving at most ~10 ticks.
double tickStep(double span) {
  double raw = span / 10;
  double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double factor : {1.0, 2.0, 5.0, 10.0})
    if (factor * power >= raw)
      return factor * power;
  return 10 * power;
}

std::string escape(StringRef text) {
  std::string out;
  for (char c : text) {
    switch (c) {
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '&':
      out += "&amp;";
      break;
    case '"':
      out += "&quot;";
      break;
    default:
      out += c;
    }
  }
  return out;
}

void drawRows(raw_ostream &os, const Simulation &simulation, double scale) {
  for (int r = 0; r < simulation.numRanks; ++r) {
    double y = kTop + r * (kRowHeight + kRowGap);
    os << formatv("<text x=\"{0}\" y=\"{1}\" text-anchor=\"end\" "
                  "class=\"label\">device {2}</text>\n",
                  kLeft - 10, y + kRowHeight / 2 + 4, r);
    os << formatv("<rect x=\"{0}\" y=\"{1}\" width=\"{2}\" height=\"{3}\" "
                  "fill=\"{4}\"/>\n",
                  kLeft, y, kPlotWidth, kRowHeight, kIdle);
  }
  for (const Simulation::Event &event : simulation.events) {
    const Colour &colour = colourOf(event);
    double x = kLeft + event.start * scale;
    double width = (event.end - event.start) * scale;
    double y = kTop + event.rank * (kRowHeight + kRowGap);
    // Later virtual stages of a rank (interleaved) are drawn lighter.
    int chunk = event.stage >= 0 ? event.stage / simulation.numRanks : 0;
    double opacity = chunk % 2 ? 0.55 : 1.0;
    os << formatv("<rect x=\"{0:f2}\" y=\"{1}\" width=\"{2:f2}\" "
                  "height=\"{3}\" fill=\"{4}\" fill-opacity=\"{5}\" "
                  "stroke=\"#ffffff\" stroke-width=\"0.75\"><title>{6} "
                  "({7:f3} ms)</title></rect>\n",
                  x, y, width, kRowHeight, colour.fill, opacity,
                  escape(nameOf(event)), (event.end - event.start) * 1e3);
    std::string number = std::to_string(event.microBatch);
    if (event.microBatch >= 0 && isCompute(event.kind) &&
        width >= 7.0 * number.size() + 4)
      os << formatv("<text x=\"{0:f2}\" y=\"{1}\" text-anchor=\"middle\" "
                    "class=\"mb\" fill=\"{2}\">{3}</text>\n",
                    x + width / 2, y + kRowHeight / 2 + 4, colour.text, number);
  }
}

/// "0", "2.5", "10": tick labels without trailing zeros.
std::string formatMs(double ms) {
  std::string text = formatv("{0:f3}", ms).str();
  while (text.back() == '0')
    text.pop_back();
  if (text.back() == '.')
    text.pop_back();
  return text;
}

void drawAxis(raw_ostream &os, double stepTime, double scale, double y) {
  os << formatv("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" "
                "stroke=\"#444\"/>\n",
                kLeft, y, kLeft + kPlotWidth);
  double stepMs = stepTime * 1e3;
  double tick = tickStep(stepMs);
  for (double t = 0; t <= stepMs * (1 + 1e-9); t += tick) {
    double x = kLeft + t / 1e3 * scale;
    os << formatv("<line x1=\"{0:f2}\" y1=\"{1}\" x2=\"{0:f2}\" y2=\"{2}\" "
                  "stroke=\"#444\"/>\n",
                  x, y, y + 5);
    os << formatv("<text x=\"{0:f2}\" y=\"{1}\" text-anchor=\"middle\" "
                  "class=\"axis\">{2} ms</text>\n",
                  x, y + 18, formatMs(t));
  }
}

/// The kinds of work the picture shows (a schedule without split backwards
/// has no weight-gradient boxes), and idle.
void drawLegend(raw_ostream &os, const Simulation &simulation, double y) {
  double x = kLeft;
  auto entry = [&](StringRef fill, StringRef label) {
    os << formatv("<rect x=\"{0}\" y=\"{1}\" width=\"14\" height=\"14\" "
                  "fill=\"{2}\"/>\n<text x=\"{3}\" y=\"{4}\" "
                  "class=\"legend\">{5}</text>\n",
                  x, y, fill, x + 20, y + 11, label);
    x += 34 + 6.5 * label.size();
  };
  for (const Colour &colour : kColours)
    if (llvm::any_of(simulation.events, [&](const Simulation::Event &event) {
          return categoryOf(event.kind) == colour.category;
        }))
      entry(colour.fill, colour.label);
  entry(kIdle, "idle");
}

} // namespace

std::string renderSvg(const Simulation &simulation, StringRef title) {
  double stepTime = simulation.stepTime > 0 ? simulation.stepTime : 1;
  double scale = kPlotWidth / stepTime;
  double rowsEnd =
      kTop + simulation.numRanks * (kRowHeight + kRowGap) - kRowGap;
  double height = rowsEnd + 70;
  std::string text;
  raw_string_ostream os(text);
  os << formatv("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" "
                "height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
                "font-family=\"Helvetica, Arial, sans-serif\">\n",
                kLeft + kPlotWidth + kRight, height);
  os << "<style>.label{font-size:13px;fill:#222}.mb{font-size:11px}"
        ".axis{font-size:11px;fill:#444}.legend{font-size:12px;fill:#222}"
        ".title{font-size:15px;font-weight:bold;fill:#222}</style>\n";
  os << "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
  os << formatv("<text x=\"{0}\" y=\"24\" class=\"title\">{1}</text>\n", kLeft,
                escape(title));
  os << formatv("<text x=\"{0}\" y=\"24\" text-anchor=\"end\" "
                "class=\"legend\">step {1} ms, devices idle {2:f1}% of the "
                "pipelined time</text>\n",
                kLeft + kPlotWidth, formatMs(simulation.stepTime * 1e3),
                simulation.bubbleFraction * 100);
  drawRows(os, simulation, scale);
  drawAxis(os, stepTime, scale, rowsEnd + 6);
  drawLegend(os, simulation, rowsEnd + 40);
  os << "</svg>\n";
  return text;
}

Error writeChromeTrace(const Simulation &simulation, StringRef path) {
  json::Value trace = traceOf(simulation);
  return writeFileAtomically(
      path, [&](raw_ostream &os) { os << formatv("{0:1}\n", trace); });
}

Error writeSvg(const Simulation &simulation, StringRef path, StringRef title) {
  std::string text = renderSvg(simulation, title);
  return writeFileAtomically(path, [&](raw_ostream &os) { os << text; });
}

} // namespace loom::sched
