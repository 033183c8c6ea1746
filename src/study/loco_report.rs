//! The leave-one-collection-out study's report (loco.rs's `Loco`) as markdown.
use super::loco::{same_sign, Loco};
use super::loco_gains::TestGain;
use std::fmt::Write;

impl Loco {
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        let yes = |b: bool| if b { "yes" } else { "no" };
        let g = |t: &TestGain| match t.sd {
            Some(sd) => format!("{:+.4} (se {:.4}, sd {:.4})", t.gain, t.se, sd),
            None => format!("{:+.4} (se {:.4})", t.gain, t.se),
        };
        for st in &self.settings {
            let _ = write!(
                s,
                "### {}: each collection left out in turn\n\n| left out | rule set on the \
                 others | its pick | test gain over stock | best method: gain | regret | harm | \
                 risk | within target | ahead beyond 2 sd |\n|---|---|---|---|---|---|---|---|---|---|\n",
                st.setting
            );
            for r in &st.rotations {
                let o = &r.outcome;
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} | {}: {:+.4} | {:.4} | {:.4} | {:.4} | {} | {} |",
                    r.left_out,
                    r.rule.name(),
                    o.pick.method,
                    g(&o.pick),
                    o.best.method,
                    o.best.gain,
                    o.regret,
                    o.harm,
                    o.risk,
                    yes(o.within_target),
                    yes(o.ahead)
                );
            }
            let _ = write!(
                s,
                "\nShipped ({}, selected over all {} collections): {}\n\n| collection | pick | \
                 test gain | wins / losses over test queries | harm |\n|---|---|---|---|---|\n",
                st.setting,
                self.collections.len(),
                st.shipped.name()
            );
            for o in &st.shipped_outcomes {
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} / {} of {} | {:.4} |",
                    o.collection,
                    o.pick.method,
                    g(&o.pick),
                    o.pick.wins,
                    o.pick.losses,
                    o.pick.queries,
                    o.harm
                );
            }
            s.push('\n');
        }
        s.push_str(
            "### Dev and test: gain on dev (the recipe's dev figures) against gain on test\n\n\
             | method | per collection: dev / test | same sign |\n|---|---|---|\n",
        );
        for (m, rows) in &self.agreement {
            let cells: Vec<String> = (rows.iter())
                .map(|(c, d, t)| format!("{c} {d:+.4} / {t:+.4}"))
                .collect();
            let agree = same_sign(rows);
            let _ = writeln!(
                s,
                "| {m} | {} | {agree} of {} |",
                cells.join("; "),
                rows.len()
            );
        }
        s
    }
}
