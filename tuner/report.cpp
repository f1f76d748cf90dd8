// --report DIR: what a tune run did, for a person to open (SVG plots) and for scripts
// (report.json).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <limits>
#include <sstream>

#include "ocltk/status.hpp"
#include "tuner.hpp"

namespace ocltk::tuner {
namespace {

std::string xml_escape(const std::string& text) {
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

// Time of every evaluated point in order (log scale; rejected points as red crosses at
// the top), the best so far as a step line, the built-in default as a dashed line.
std::string class_svg(const ClassResult& c) {
  constexpr double kW = 760, kH = 420, kLeft = 70, kRight = 20, kTop = 48, kBottom = 50;
  const double pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  double lo = std::numeric_limits<double>::infinity(), hi = 0;
  for (const Evaluation& e : c.history)
    if (e.ok) {
      lo = std::min(lo, e.time_ms);
      hi = std::max(hi, e.time_ms);
    }
  if (!(hi > 0)) lo = hi = 1;
  const double llo = std::floor(std::log10(lo) * 4) / 4, lhi = std::max(llo + 0.25, std::ceil(std::log10(hi) * 4) / 4);
  const std::size_t n = std::max<std::size_t>(1, c.history.size());
  auto x_of = [&](std::size_t i) { return kLeft + pw * (n == 1 ? 0.5 : double(i) / double(n - 1)); };
  auto y_of = [&](double ms) { return kTop + ph * (1 - (std::log10(ms) - llo) / (lhi - llo)); };

  std::ostringstream svg;
  svg << std::fixed << std::setprecision(1);
  svg << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kW << "\" height=\"" << kH
      << "\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  std::ostringstream title;
  title << c.kernel << " / " << c.shape_class << " (" << format_problem(c.problem) << "): " << c.evaluations
        << " evaluations of " << c.space_size;
  if (c.best.ok) title << ", best " << std::setprecision(4) << c.best.time_ms << " ms";
  if (c.speedup() > 0)
    title << ", " << std::setprecision(2) << c.speedup() << "x the default";
  else if (!c.builtin_measured())
    title << ", the default not measured";
  svg << "<text x=\"" << kLeft << "\" y=\"20\" font-size=\"14\">" << xml_escape(title.str()) << "</text>\n";
  svg << "<text x=\"" << kLeft << "\" y=\"38\" fill=\"#555\">"
      << xml_escape(c.best.ok ? c.best.algorithm + " " + format_params(c.best.params) : "nothing verified")
      << "</text>\n";
  // Axes and decade grid lines.
  svg << "<rect x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << pw << "\" height=\"" << ph
      << "\" fill=\"none\" stroke=\"#888\"/>\n";
  for (double d = std::ceil(llo * 4) / 4; d <= lhi + 1e-9; d += 0.25) {
    const double y = y_of(std::pow(10.0, d));
    svg << "<line x1=\"" << kLeft << "\" x2=\"" << kLeft + pw << "\" y1=\"" << y << "\" y2=\"" << y
        << "\" stroke=\"#eee\"/>\n<text x=\"" << kLeft - 6 << "\" y=\"" << y + 4 << "\" text-anchor=\"end\">"
        << std::setprecision(3) << std::pow(10.0, d) << std::setprecision(1) << "</text>\n";
  }
  svg << "<text x=\"" << kLeft + pw / 2 << "\" y=\"" << kH - 10
      << "\" text-anchor=\"middle\">evaluation (in order measured)</text>\n"
      << "<text transform=\"translate(16," << kTop + ph / 2
      << ") rotate(-90)\" text-anchor=\"middle\">kernel time, ms (log)</text>\n";
  for (std::size_t i = 0; i < n; i += std::max<std::size_t>(1, n / 8))
    svg << "<text x=\"" << x_of(i) << "\" y=\"" << kTop + ph + 16 << "\" text-anchor=\"middle\">" << i + 1
        << "</text>\n";
  if (c.builtin.ok && c.builtin.time_ms >= std::pow(10.0, llo) && c.builtin.time_ms <= std::pow(10.0, lhi))
    svg << "<line x1=\"" << kLeft << "\" x2=\"" << kLeft + pw << "\" y1=\"" << y_of(c.builtin.time_ms) << "\" y2=\""
        << y_of(c.builtin.time_ms) << "\" stroke=\"#999\" stroke-dasharray=\"5,4\"/><text x=\"" << kLeft + pw - 4
        << "\" y=\"" << y_of(c.builtin.time_ms) - 4 << "\" text-anchor=\"end\" fill=\"#777\">built-in default</text>\n";
  // Points.
  for (std::size_t i = 0; i < c.history.size(); ++i) {
    const Evaluation& e = c.history[i];
    if (e.ok) {
      svg << "<circle cx=\"" << x_of(i) << "\" cy=\"" << y_of(e.time_ms) << "\" r=\"2.5\" fill=\""
          << (e.cached ? "#9bb" : "#3a7") << "\"/>\n";
    } else {
      const double x = x_of(i), y = kTop + 6;
      svg << "<path d=\"M" << x - 3 << " " << y - 3 << "L" << x + 3 << " " << y + 3 << "M" << x - 3 << " " << y + 3
          << "L" << x + 3 << " " << y - 3 << "\" stroke=\"#d33\"><title>" << xml_escape(e.rejected)
          << "</title></path>\n";
    }
  }
  // Best so far.
  std::ostringstream path;
  double best = std::numeric_limits<double>::infinity();
  bool started = false;
  for (std::size_t i = 0; i < c.history.size(); ++i) {
    const Evaluation& e = c.history[i];
    if (e.ok && e.time_ms < best) {
      if (started) path << " L" << x_of(i) << " " << y_of(best);
      best = e.time_ms;
      path << (started ? " L" : "M") << x_of(i) << " " << y_of(best);
      started = true;
    }
  }
  if (started) {
    path << " L" << x_of(n - 1) << " " << y_of(best);
    svg << "<path d=\"" << path.str() << "\" fill=\"none\" stroke=\"#25c\" stroke-width=\"2\"/>\n";
  }
  svg << "<text x=\"" << kLeft + 8 << "\" y=\"" << kTop + ph - 8 << "\" fill=\"#25c\">best so far</text><text x=\""
      << kLeft + 100 << "\" y=\"" << kTop + ph - 8 << "\" fill=\"#3a7\">measured point</text><text x=\"" << kLeft + 220
      << "\" y=\"" << kTop + ph - 8 << "\" fill=\"#d33\">rejected (hover: why)</text>\n";
  svg << "</svg>\n";
  return svg.str();
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp);
    out << text;
    if (!out) throw Error(ErrorCode::kIo, "cannot write " + tmp.string());
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw Error(ErrorCode::kIo, "cannot write " + path.string() + ": " + ec.message());
}

}  // namespace

void write_report(const std::string& dir, const TuneResult& result) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir))
    throw Error(ErrorCode::kIo, "--report " + dir + " cannot be created as a folder");
  std::ostringstream json;
  json << std::setprecision(6);
  const ProfileDevice& d = result.profile.device;
  json << "{\n  \"device\": {\"name\": " << json_string(d.name) << ", \"vendor\": " << json_string(d.vendor)
       << ", \"driver\": " << json_string(d.driver) << "},\n  \"seconds\": " << result.seconds
       << ",\n  \"interrupted\": " << (result.interrupted ? "true" : "false") << ",\n  \"classes\": [";
  for (std::size_t i = 0; i < result.classes.size(); ++i) {
    const ClassResult& c = result.classes[i];
    const std::string plot = c.kernel + "-" + c.shape_class + ".svg";
    write_file(std::filesystem::path(dir) / plot, class_svg(c));
    json << (i ? "," : "") << "\n    {" << json_class_fields(c) << ", \"plot\": " << json_string(plot)
         << ",\n     \"history\": [";
    double best = std::numeric_limits<double>::infinity();
    for (std::size_t j = 0; j < c.history.size(); ++j) {
      const Evaluation& e = c.history[j];
      if (e.ok) best = std::min(best, e.time_ms);
      json << (j ? "," : "") << "\n       {\"choice\": " << json_choice(e)
           << ", \"cached\": " << (e.cached ? "true" : "false") << ", \"best_so_far_ms\": ";
      if (std::isfinite(best)) {
        json << best;
      } else {
        json << "null";
      }
      json << "}";
    }
    json << "],\n     \"retimed\": [";
    for (std::size_t j = 0; j < c.retimed.size(); ++j) json << (j ? ", " : "") << json_choice(c.retimed[j]);
    json << "],\n     \"runoffs\": [";
    for (std::size_t j = 0; j < c.runoffs.size(); ++j) {
      const ClassResult::Runoff& r = c.runoffs[j];
      json << (j ? ", " : "") << "{\"kept\": " << json_choice(r.kept)
           << ", \"challenger\": " << json_choice(r.challenger) << ", \"pairs\": " << r.pairs
           << ", \"ratio\": " << r.ratio << ", \"challenger_kept\": " << (r.challenger_kept ? "true" : "false") << "}";
    }
    json << "], \"retime_seconds\": " << c.retime_seconds << "}";
  }
  json << "\n  ],\n  \"served\": " << json_served(result.served) << "\n}\n";
  write_file(std::filesystem::path(dir) / "report.json", json.str());
}

}  // namespace ocltk::tuner
