// Repeats and intervals: the Student t arithmetic against hand-computed and
// tabulated values, paired differences and verdicts on constructed cases,
// and a row's figures over its repeats (means, spread, the curve's band).
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "report/questions.h"
#include "ablate/repeats.h"
#include "ablate/seed_questions.h"
#include "ablate/seed_report.h"
#include "ablate/suite.h"
#include "ablate/study_budget.h"
#include "core/error.h"
#include "core/stats.h"

namespace hymba {
namespace {

using report::Answer;
using report::Claim;
using report::Question;
using report::RepeatValues;
using report::Verdict;

TEST(Stats, StudentTQuantilesMatchTheTables) {
  // Two-sided 95 % critical values from the standard t table.
  const std::pair<double, double> table[] = {{1, 12.7062}, {2, 4.3027},  {3, 3.1824},   {4, 2.7764},
                                             {9, 2.2622},  {30, 2.0423}, {1000, 1.9623}};
  for (const auto& [df, t] : table) EXPECT_NEAR(student_t_quantile(0.975, df), t, 1e-4) << "df " << df;
  EXPECT_NEAR(student_t_quantile(0.995, 5), 4.0321, 1e-4);
  EXPECT_NEAR(student_t_quantile(0.025, 4), -2.7764, 1e-4);
  EXPECT_NEAR(student_t_quantile(0.5, 7), 0.0, 1e-9);
  // The CDF: df 1 is the Cauchy distribution, 1/2 + atan(t)/pi.
  for (double t : {-3.0, -0.5, 0.0, 0.7, 10.0}) EXPECT_NEAR(student_t_cdf(t, 1), 0.5 + std::atan(t) / M_PI, 1e-12);
  EXPECT_THROW(student_t_quantile(1.0, 3), Error);
  EXPECT_THROW(student_t_cdf(1.0, 0.5), Error);
}

TEST(Stats, SpreadIsMeanSdAndTheStudentInterval) {
  const Spread s = spread_of({1, 2, 3, 4});
  EXPECT_EQ(s.n, 4);
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
  EXPECT_NEAR(s.sd, std::sqrt(5.0 / 3.0), 1e-12);  // sum of squares 5 over n - 1
  EXPECT_NEAR(s.half_width, 3.182446 * std::sqrt(5.0 / 3.0) / 2.0, 1e-5);
  EXPECT_NEAR(s.low(), 2.5 - 2.054260, 1e-5);
  EXPECT_DOUBLE_EQ(s.min, 1.0);
  EXPECT_DOUBLE_EQ(s.max, 4.0);
  const Spread one = spread_of({7.5});
  EXPECT_FALSE(one.has_interval());
  EXPECT_DOUBLE_EQ(one.mean, 7.5);
  EXPECT_DOUBLE_EQ(one.half_width, 0.0);
  EXPECT_EQ(spread_of({}).n, 0);
  const Spread same = spread_of({2, 2, 2});
  EXPECT_DOUBLE_EQ(same.half_width, 0.0);
}

Question q(Claim c, double margin = 0.0) { return {"q", "Q?", "yes", c, "a", "b", "best_val_loss", margin}; }

TEST(Questions, PairedDifferencesUseTheRepeatsBothRowsHave) {
  // b - a per shared repeat (lower is better): repeat 3 has no partner.
  const RepeatValues a = {{0, 1.0}, {1, 1.1}, {2, 0.9}, {3, 0.1}}, b = {{0, 1.5}, {1, 1.4}, {2, 1.6}};
  const Answer ans = report::answer_question(q(Claim::kBetter), true, a, b);
  ASSERT_EQ(ans.diffs.size(), 3u);
  EXPECT_EQ(ans.repeats, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_NEAR(ans.diffs[0], 0.5, 1e-12);
  EXPECT_NEAR(ans.diffs[1], 0.3, 1e-12);
  EXPECT_NEAR(ans.diffs[2], 0.7, 1e-12);
  EXPECT_NEAR(ans.spread.mean, 0.5, 1e-12);
  EXPECT_NEAR(ans.spread.sd, 0.2, 1e-12);
  EXPECT_NEAR(ans.spread.low(), 0.5 - 4.302653 * 0.2 / std::sqrt(3.0), 1e-6);  // 0.00317 > 0
  EXPECT_EQ(ans.verdict, Verdict::kHolds);
  // Higher is better: the same values argue the other way.
  EXPECT_EQ(report::answer_question(q(Claim::kBetter), false, a, b).verdict, Verdict::kReversed);
}

TEST(Questions, VerdictsHoldReverseOrStayInconclusive) {
  const RepeatValues base = {{0, 2.0}, {1, 2.0}, {2, 2.0}};
  auto shifted = [&](std::vector<double> by) {
    RepeatValues v;
    for (size_t i = 0; i < by.size(); ++i) v[static_cast<int64_t>(i)] = 2.0 + by[i];
    return v;
  };
  // a better than b: b - a.
  EXPECT_EQ(report::answer_question(q(Claim::kBetter), true, base, shifted({0.5, 0.3, 0.7})).verdict, Verdict::kHolds);
  EXPECT_EQ(report::answer_question(q(Claim::kBetter), true, base, shifted({-0.5, -0.3, -0.7})).verdict,
            Verdict::kReversed);
  EXPECT_EQ(report::answer_question(q(Claim::kBetter), true, base, shifted({0.5, -0.3, 0.7})).verdict,
            Verdict::kInconclusive);
  // a costs at most 0.1 over b: a's advantage stays above -0.1.
  EXPECT_EQ(report::answer_question(q(Claim::kNoWorse, 0.1), true, shifted({0.02, 0.03, 0.01}), base).verdict,
            Verdict::kHolds);
  EXPECT_EQ(report::answer_question(q(Claim::kNoWorse, 0.1), true, shifted({0.5, 0.6, 0.55}), base).verdict,
            Verdict::kReversed);
  EXPECT_EQ(report::answer_question(q(Claim::kNoWorse, 0.1), true, shifted({0.0, 0.2, 0.1}), base).verdict,
            Verdict::kInconclusive);
  // a within 0.1 of b, either way.
  EXPECT_EQ(report::answer_question(q(Claim::kSimilar, 0.1), true, shifted({0.01, -0.01, 0.0}), base).verdict,
            Verdict::kHolds);
  EXPECT_EQ(report::answer_question(q(Claim::kSimilar, 0.1), true, shifted({-0.5, -0.6, -0.55}), base).verdict,
            Verdict::kReversed);
  EXPECT_EQ(report::answer_question(q(Claim::kSimilar, 0.1), true, shifted({0.0, 0.2, 0.1}), base).verdict,
            Verdict::kInconclusive);
  // a above 0.5 (b unused).
  const RepeatValues mix = {{0, 0.61}, {1, 0.63}, {2, 0.62}};
  EXPECT_EQ(report::answer_question(q(Claim::kAbove, 0.5), true, mix, {}).verdict, Verdict::kHolds);
  EXPECT_EQ(report::answer_question(q(Claim::kAbove, 0.7), true, mix, {}).verdict, Verdict::kReversed);
  EXPECT_EQ(report::answer_question(q(Claim::kAbove, 0.62), true, mix, {}).verdict, Verdict::kInconclusive);
}

TEST(Questions, OneRepeatOrNoPairIsInconclusiveWithTheReason) {
  const Answer one = report::answer_question(q(Claim::kBetter), true, {{0, 1.0}}, {{0, 3.0}});
  EXPECT_EQ(one.verdict, Verdict::kInconclusive);
  EXPECT_EQ(one.note, "one repeat: no interval");
  EXPECT_NEAR(one.spread.mean, 2.0, 1e-12);
  const Answer none = report::answer_question(q(Claim::kBetter), true, {{0, 1.0}}, {{1, 3.0}});
  EXPECT_EQ(none.verdict, Verdict::kInconclusive);
  EXPECT_EQ(none.note, "no repeat measured for both rows");
  const std::string md = report::answers_markdown({one});
  EXPECT_NE(md.find("inconclusive at this budget (one repeat: no interval)"), std::string::npos) << md;
}

TEST(Questions, SuiteFileQuestionsAreCheckedFieldByField) {
  using nlohmann::json;
  const Question ok = report::question_from_json(
      json{{"question", "Q?"}, {"claim", "no_worse"}, {"a", "x"}, {"b", "y"}, {"margin", 0.02}}, "s.json",
      "best_val_loss");
  EXPECT_EQ(ok.claim, Claim::kNoWorse);
  EXPECT_EQ(ok.metric, "best_val_loss");
  EXPECT_DOUBLE_EQ(ok.margin, 0.02);
  auto error_of = [](const json& j) {
    try {
      (void)report::question_from_json(j, "s.json", "best_val_loss");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of({{"question", "Q?"}, {"claim", "wins"}, {"a", "x"}, {"b", "y"}}).find("'claim'"),
            std::string::npos);
  EXPECT_NE(error_of({{"question", "Q?"}, {"claim", "similar"}, {"a", "x"}, {"b", "y"}}).find("'margin'"),
            std::string::npos);
  EXPECT_NE(error_of({{"question", "Q?"}, {"claim", "better"}, {"a", "x"}}).find("'b'"), std::string::npos);
  EXPECT_NE(error_of({{"question", "Q?"}, {"claim", "better"}, {"a", "x"}, {"b", "y"}, {"why", 1}}).find("'why'"),
            std::string::npos);
}

ablate::RowResult run(int64_t repeat, double loss, std::vector<std::pair<int64_t, double>> curve) {
  ablate::RowResult r;
  r.id = "row";
  r.name = "Row";
  r.repeat = repeat;
  r.seed = ablate::repeat_seed(42, repeat);
  r.best_val_loss = loss;
  r.best_val_ppl = std::exp(loss);
  r.final_val_loss = loss + 0.1;
  r.train_tokens_per_s = 1000.0 * static_cast<double>(repeat + 1);
  r.samples = {{"p", "repeat " + std::to_string(repeat)}};
  for (const auto& [step, v] : curve) r.curve.push_back({step, v, std::exp(v), 0.0, {}});
  return r;
}

TEST(Repeats, SeedsAndRunDirectoriesFollowTheRepeat) {
  EXPECT_EQ(ablate::repeat_seed(42, 0), 42u);  // repeat 0 is the run without repeats
  EXPECT_EQ(ablate::repeat_seed(42, 2), 44u);
  EXPECT_EQ(ablate::repeat_run_name("hybrid", 0), "hybrid");
  EXPECT_EQ(ablate::repeat_run_name("hybrid", 3), "hybrid.rep3");
  EXPECT_NE(ablate::run_key("a", 1), ablate::run_key("a", 0));
}

TEST(Repeats, ARowOverItsRepeatsHasMeansSpreadAndACurveBand) {
  // Given out of order: the first repeat's samples stay, figures are means.
  const std::vector<ablate::RowResult> runs = {run(2, 3.0, {{10, 4.0}, {20, 3.0}}), run(0, 1.0, {{10, 2.0}, {20, 1.0}}),
                                               run(1, 2.0, {{10, 3.0}, {20, 2.0}})};
  const ablate::RowResult m = ablate::mean_row(runs);
  EXPECT_EQ(m.samples.front().text, "repeat 0");
  EXPECT_DOUBLE_EQ(m.best_val_loss, 2.0);
  EXPECT_DOUBLE_EQ(m.train_tokens_per_s, 2000.0);
  ASSERT_EQ(m.curve.size(), 2u);
  EXPECT_DOUBLE_EQ(m.curve[0].val_loss, 3.0);
  const ablate::RowSpread s = ablate::row_spread(runs);
  EXPECT_EQ(s.repeats, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(s.seeds, (std::vector<uint64_t>{42, 43, 44}));
  EXPECT_DOUBLE_EQ(s.best_val_loss.mean, 2.0);
  EXPECT_DOUBLE_EQ(s.best_val_loss.sd, 1.0);
  EXPECT_NEAR(s.best_val_loss.half_width, 4.302653 / std::sqrt(3.0), 1e-5);
  ASSERT_EQ(s.val_loss_band.size(), 2u);
  EXPECT_EQ(s.val_loss_band[1].step, 20);
  EXPECT_EQ(s.val_loss_band[1].n, 3);
  EXPECT_DOUBLE_EQ(s.val_loss_band[1].min, 1.0);
  EXPECT_DOUBLE_EQ(s.val_loss_band[1].max, 3.0);
  EXPECT_DOUBLE_EQ(s.val_loss_band[1].mean, 2.0);
  EXPECT_FALSE(s.mixing.n);  // no learned-beta fusion
  const nlohmann::json j = ablate::spread_to_json(s);
  EXPECT_EQ(j["val_loss_band"][1]["max"], 3.0);
  EXPECT_EQ(j["best_val_loss"]["ci95"].size(), 2u);
  const std::string md = ablate::spread_markdown({s});
  EXPECT_NE(md.find("2.0000 ± 1.0000 ["), std::string::npos) << md;
}

TEST(Repeats, TheLearnedMixingAgainstStepsCarriesItsBandOverRepeats) {
  // Two layers per point; the band is of their mean, over the repeats.
  std::vector<ablate::RowResult> runs = {run(0, 1.0, {{10, 2.0}, {20, 1.0}}), run(1, 1.0, {{10, 2.0}, {20, 1.0}})};
  runs[0].curve[0].attention_mixing = {0.5, 0.5};
  runs[0].curve[1].attention_mixing = {0.6, 0.4};   // mean 0.5
  runs[1].curve[0].attention_mixing = {0.5, 0.7};   // mean 0.6
  runs[1].curve[1].attention_mixing = {0.9, 0.7};   // mean 0.8
  const ablate::RowSpread s = ablate::row_spread(runs);
  ASSERT_EQ(s.mixing_band.size(), 2u);
  EXPECT_EQ(s.mixing_band[0].step, 10);
  EXPECT_DOUBLE_EQ(s.mixing_band[0].min, 0.5);
  EXPECT_DOUBLE_EQ(s.mixing_band[0].max, 0.6);
  EXPECT_DOUBLE_EQ(s.mixing_band[1].mean, 0.65);
  EXPECT_EQ(s.mixing_band[1].n, 2);
  EXPECT_DOUBLE_EQ(ablate::spread_to_json(s)["mixing_band"][1]["max"].get<double>(), 0.8);

  // The seed 003 chart plots that band; rows without mixing are left out.
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("mixing_chart_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  ablate::RowResult plain = run(0, 1.0, {{10, 2.0}});
  plain.id = "plain";
  const std::vector<ablate::RowResult> rows = {plain, ablate::mean_row(runs)};
  EXPECT_EQ(ablate::seed_chart_names("003", rows), (std::vector<std::string>{"seed003_mixing"}));
  EXPECT_TRUE(ablate::seed_chart_names("003", {plain}).empty());
  const auto charts = ablate::seed_charts("003", rows, {s}, dir.string());
  ASSERT_EQ(charts.size(), 1u);
  EXPECT_NE(charts[0].second.find("index 0 using 1:3:4 with filledcurves"), std::string::npos) << charts[0].second;
  EXPECT_EQ(charts[0].second.find("index 1"), std::string::npos) << charts[0].second;
  std::ifstream in(dir / "seed003_mixing.dat");
  const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(data, "# row\n10 0.55 0.5 0.6\n20 0.65 0.5 0.8\n\n\n");
  // Without spreads, each row's own mean line.
  (void)ablate::seed_charts("003", rows, {}, dir.string());
  std::ifstream alone(dir / "seed003_mixing.dat");
  const std::string own((std::istreambuf_iterator<char>(alone)), std::istreambuf_iterator<char>());
  EXPECT_EQ(own, "# row\n10 0.55 0.55 0.55\n20 0.65 0.65 0.65\n\n\n");
  std::filesystem::remove_all(dir);
}

TEST(Repeats, QuestionsAreAnsweredFromEveryRunOfTheSuite) {
  std::vector<ablate::RowResult> runs;
  for (int64_t rep = 0; rep < 3; ++rep) {
    runs.push_back(run(rep, 1.0 + 0.01 * static_cast<double>(rep), {}));
    ablate::RowResult other = run(rep, 1.5 - 0.01 * static_cast<double>(rep), {});
    other.id = "other";
    runs.push_back(other);
  }
  Question better = q(Claim::kBetter);
  better.row_a = "row";
  better.row_b = "other";
  Question speed = better;
  speed.metric = "train_tok_s";  // equal speeds: a zero difference, no interval width
  const auto answers = ablate::answer_questions({better, speed}, runs);
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_EQ(answers[0].verdict, Verdict::kHolds);
  EXPECT_NEAR(answers[0].spread.mean, 0.5 - 0.02, 1e-12);
  EXPECT_FALSE(answers[1].lower_is_better);
  EXPECT_EQ(answers[1].verdict, Verdict::kInconclusive);
  EXPECT_THROW((void)ablate::run_metric(runs[0], "val_lossy"), Error);
}

TEST(StudyBudget, SeedSuitesTrainTinyRowsFor300StepsThreeTimes) {
  for (const char* suite : {"seed-000", "seed-ablation", "hymba-roadmap", "seed-003"}) {
    const ablate::StudyBudget b = ablate::study_budget(suite);
    EXPECT_EQ(b.scale, "tiny") << suite;
    EXPECT_EQ(b.repeats, 3) << suite;
    EXPECT_EQ(b.train["steps"], 300) << suite;
    EXPECT_EQ(b.train["batch"], 8) << suite;
    EXPECT_EQ(b.train["seq_len"], 256) << suite;
  }
  EXPECT_FALSE(ablate::study_budget("seed-003-long").train.contains("seq_len"));  // T per row
  EXPECT_TRUE(ablate::study_budget("demo").train.empty());                        // its own recipe
  EXPECT_THROW(ablate::study_budget("my-suite.json"), Error);
}

// Every built-in seed suite asks all its seed's questions: a question whose
// row id no longer exists would be dropped silently, so the counts are fixed.
TEST(SeedQuestions, EveryBuiltInSuiteAsksItsSeedsQuestionsOfRowsItHas) {
  const std::pair<const char*, size_t> expected[] = {{"seed-000", 7},      {"seed-ablation", 7}, {"hymba-roadmap", 10},
                                                     {"hymba-roadmap-epoch", 10}, {"seed-003", 7}, {"arch-compare", 1},
                                                     {"seed-003-long", 4}, {"demo", 3}};
  for (const auto& [name, count] : expected) {
    const ablate::Suite suite = ablate::load_suite(name, "tiny");
    const std::vector<report::Question> qs = ablate::seed_questions(suite);
    EXPECT_EQ(qs.size(), count) << name;
    for (const report::Question& q : qs) {
      EXPECT_NO_THROW((void)ablate::metric_lower_is_better(q.metric)) << name << " " << q.id;
      EXPECT_FALSE(q.text.empty() || q.seed_says.empty()) << name << " " << q.id;
    }
  }
  ablate::SuiteChoices rope;
  rope.scale = "tiny";
  rope.transformer = "rope";
  EXPECT_EQ(ablate::seed_questions(ablate::load_suite("seed-003", rope)).size(), 7u);
}

}  // namespace
}  // namespace hymba
