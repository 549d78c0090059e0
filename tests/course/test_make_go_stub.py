"""make_go_stub: a Go solution's regions become a stub that still compiles (the learner's 19b file)."""

import pytest

from ringlab.course.make_exercises import make_go_stub

SOLUTION = '''// Package solution does it.
package solution

import (
\t"context"
\t"fmt"
\tstr "strings"
\t"time"

\t"ringlab/shards"
)

// Options is shared.
type Options = shards.Options

// Work works.
func Work(ctx context.Context, opts Options) error {
\t// BEGIN SOLUTION
\ttime.Sleep(time.Millisecond)
\treturn fmt.Errorf("%s", str.ToUpper("x"))
\t// END SOLUTION
}

// BEGIN SOLUTION
func helper() string { return fmt.Sprint(1) }

// END SOLUTION
'''


def test_regions_become_a_not_implemented_return_and_unused_imports_go():
    stub = make_go_stub(SOLUTION, "19b", "exercise")
    assert stub == '''// Package solution does it.
package exercise

import (
\t"context"
\t"errors"

\t"ringlab/shards"
)

// Options is shared.
type Options = shards.Options

// Work works.
func Work(ctx context.Context, opts Options) error {
\treturn errors.New("19b: not implemented: replace this line with your code")
}
'''


def test_an_import_still_used_outside_the_regions_stays():
    source = SOLUTION.replace("type Options = shards.Options", "type Options = shards.Options\n\nvar _ = time.Second")
    stub = make_go_stub(source, "19b", "exercise")
    assert '\t"time"\n' in stub and '\t"fmt"\n' not in stub


@pytest.mark.parametrize("bad", ["\t// BEGIN SOLUTION\n", "\t// END SOLUTION\n",
                                 "\t// BEGIN SOLUTION\n\t// BEGIN SOLUTION\n\t// END SOLUTION\n"])
def test_unbalanced_markers_are_refused(bad):
    with pytest.raises(ValueError, match="SOLUTION"):
        make_go_stub("package p\n\nimport (\n\t\"errors\"\n)\n\nfunc f() error {\n" + bad + "}\n", "19b", "p")
