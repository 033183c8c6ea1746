//! Studies over evaluations' results, read back from their results files: methods over seeds
//! (`over_seeds`, for `report`), a training setting picked on dev results (`pick`, read back by
//! `--lr-from`), a method chosen on dev queries with its evidence and test read once for it
//! (`choice`, `dev_evidence`, `choice_report`, `finals`, for `choose`), and leave one collection
//! out (`loco*`, for `loco`, its rules applied by `choose --rule-from`). Nothing here evaluates a
//! model: it reads what eval/ wrote, so it imports no evaluator.
pub mod choice;
pub mod choice_report;
pub mod dev_evidence;
pub mod finals;
pub mod loco;
pub mod loco_gains;
pub mod loco_report;
pub mod loco_rule;
pub mod loco_shipped;
pub mod over_seeds;
pub mod pick;
