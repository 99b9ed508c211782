// The questions each seed suite asks: the seeds' own stated conclusions (or
// the paper's, for the roadmap) as paired comparisons of the suite's rows
// (ablate/questions.h). Questions naming a row the suite lacks are dropped.
#pragma once

#include <vector>

#include "report/questions.h"
#include "ablate/suite.h"

namespace hymba::ablate {

using namespace report;  // tables, charts, questions and verdicts (src/report)

std::vector<Question> seed_questions(const Suite& suite);

}  // namespace hymba::ablate
