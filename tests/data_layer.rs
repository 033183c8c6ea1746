//! The data layer: every format reads the same rows, outputs are atomic, and each kind of bad input
//! gives one clear error naming file, row and column.
mod common;
use arrow_array::{ArrayRef, BinaryArray, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{Field, Schema};
use condenser::data::{self, write_parquet, ParquetSink};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn batch(cols: Vec<(&str, ArrayRef)>) -> RecordBatch {
    let fields: Vec<Field> = cols
        .iter()
        .map(|(n, a)| Field::new(*n, a.data_type().clone(), true))
        .collect();
    RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        cols.into_iter().map(|(_, a)| a).collect(),
    )
    .unwrap()
}

fn parquet(dir: &Path, name: &str, b: &RecordBatch) -> PathBuf {
    let p = dir.join(name);
    write_parquet(&p, b.schema(), [b]).unwrap();
    p
}

/// Read the whole file: texts of `text_cols` and labels of `label` (if given), or the first error.
fn read_all(
    path: &Path,
    text_cols: &[&str],
    label: Option<&str>,
) -> condenser::Result<(Vec<Vec<String>>, Vec<f64>)> {
    let mut cols: Vec<&str> = text_cols.to_vec();
    cols.extend(label);
    let mut texts = vec![Vec::new(); text_cols.len()];
    let mut labels = Vec::new();
    for b in data::open(path, &cols)? {
        let b = b?;
        for (t, c) in texts.iter_mut().zip(text_cols) {
            t.extend(b.texts(c)?.into_iter().map(String::from));
        }
        if let Some(l) = label {
            labels.extend(b.labels(l)?);
        }
    }
    Ok((texts, labels))
}

fn err(r: condenser::Result<impl std::fmt::Debug>) -> String {
    r.expect_err("bad input must be an error").to_string()
}

/// The first 50 STSb dev pairs, re-written as CSV (with quoting), TSV, JSONL and Arrow IPC, read
/// back identically to the Parquet original.
#[test]
fn all_formats_read_the_same_real_rows() {
    let dir = tempfile::tempdir().unwrap();
    let src = common::data("stsb/dev.parquet");
    let (texts, labels) = read_all(&src, &["sentence1", "sentence2"], Some("label")).unwrap();
    let n = 50;
    let (s1, s2, lab) = (&texts[0][..n], &texts[1][..n], &labels[..n]);
    let q = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
    let mut csv = String::from("sentence1,sentence2,label\n");
    let mut tsv = String::from("sentence1\tsentence2\tlabel\n");
    let mut jsonl = String::new();
    for i in 0..n {
        csv += &format!("{},{},{}\r\n", q(&s1[i]), q(&s2[i]), lab[i]);
        tsv += &format!("{}\t{}\t{}\n", s1[i], s2[i], lab[i]);
        jsonl += &serde_json::json!({"sentence1": s1[i], "sentence2": s2[i], "label": lab[i], "extra": [1]}).to_string();
        jsonl += "\n";
    }
    std::fs::write(dir.path().join("d.csv"), csv).unwrap();
    std::fs::write(dir.path().join("d.tsv"), tsv).unwrap();
    std::fs::write(dir.path().join("d.jsonl"), jsonl).unwrap();
    let rb = batch(vec![
        (
            "sentence1",
            Arc::new(StringArray::from(s1.to_vec())) as ArrayRef,
        ),
        ("sentence2", Arc::new(StringArray::from(s2.to_vec()))),
        ("label", Arc::new(Float64Array::from(lab.to_vec()))),
    ]);
    let mut w = arrow_ipc::writer::FileWriter::try_new(
        std::fs::File::create(dir.path().join("d.arrow")).unwrap(),
        &rb.schema(),
    )
    .unwrap();
    w.write(&rb).unwrap();
    w.finish().unwrap();
    let mut s = arrow_ipc::writer::StreamWriter::try_new(
        std::fs::File::create(dir.path().join("d.arrows")).unwrap(),
        &rb.schema(),
    )
    .unwrap();
    s.write(&rb).unwrap();
    s.finish().unwrap();
    for f in ["d.csv", "d.tsv", "d.jsonl", "d.arrow", "d.arrows"] {
        let (t, l) = read_all(
            &dir.path().join(f),
            &["sentence1", "sentence2"],
            Some("label"),
        )
        .unwrap();
        assert_eq!((&t[0][..], &t[1][..]), (s1, s2), "{f}");
        assert_eq!(l, lab, "{f}");
    }
}

#[test]
fn csv_quoted_fields_keep_delimiters_quotes_and_newlines() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("q.csv");
    std::fs::write(
        &p,
        "text,n\n\"a, b\",1\n\"say \"\"hi\"\"\",2\n\"two\nlines\n\",3\nplain,4\n",
    )
    .unwrap();
    let (t, l) = read_all(&p, &["text"], Some("n")).unwrap();
    assert_eq!(t[0], ["a, b", "say \"hi\"", "two\nlines\n", "plain"]);
    assert_eq!(l, [1.0, 2.0, 3.0, 4.0]);
}

#[test]
fn streams_a_large_parquet_in_bounded_batches() {
    let src = common::data("snli/dev.parquet");
    let mut rows = 0;
    for b in data::open(&src, &["sentence1"]).unwrap() {
        let b = b.unwrap();
        assert!(b.num_rows() <= data::BATCH_ROWS);
        assert_eq!(b.first_row, rows);
        rows += b.num_rows();
    }
    assert_eq!(rows, 9842);
}

#[test]
fn missing_file_and_unknown_extension() {
    let e = err(data::open(Path::new("/nonexistent/x.parquet"), &["text"]));
    assert!(
        e.contains("/nonexistent/x.parquet") && e.contains("no such file"),
        "{e}"
    );
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("data.xlsx");
    std::fs::write(&p, "x").unwrap();
    let e = err(data::open(&p, &["text"]));
    assert!(
        e.contains("data.xlsx") && e.contains("unknown extension 'xlsx'"),
        "{e}"
    );
}

#[test]
fn missing_column_names_the_columns_the_file_has() {
    let src = common::data("stsb/dev.parquet");
    let e = err(data::open(&src, &["sentence1", "question"]));
    assert!(
        e.contains("dev.parquet")
            && e.contains("column 'question'")
            && e.contains("sentence1, sentence2"),
        "{e}"
    );
    let dir = tempfile::tempdir().unwrap();
    for (f, body) in [
        ("m.csv", "a,b\n1,2\n"),
        ("m.tsv", "a\tb\n1\t2\n"),
        ("m.jsonl", "{\"a\": 1}\n"),
    ] {
        let p = dir.path().join(f);
        std::fs::write(&p, body).unwrap();
        let e = err(data::open(&p, &["text"]));
        assert!(
            e.contains(f) && e.contains("column 'text'") && e.contains("missing"),
            "{e}"
        );
    }
}

#[test]
fn wrong_column_type() {
    let dir = tempfile::tempdir().unwrap();
    let p = parquet(
        dir.path(),
        "t.parquet",
        &batch(vec![
            ("text", Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef),
            ("label", Arc::new(StringArray::from(vec!["x", "y"]))),
        ]),
    );
    let e = err(read_all(&p, &["text"], None));
    assert!(
        e.contains("t.parquet")
            && e.contains("column 'text'")
            && e.contains("wrong column type Int64"),
        "{e}"
    );
    let e = err(read_all(&p, &[], Some("label")));
    assert!(
        e.contains("row 1, column 'label'") && e.contains("'x' is not a number"),
        "{e}"
    );
    let j = dir.path().join("t.jsonl");
    std::fs::write(&j, "{\"text\": \"a\"}\n{\"text\": \"b\"}\n{\"text\": 3}\n").unwrap();
    let e = err(read_all(&j, &["text"], None));
    assert!(
        e.contains("t.jsonl") && e.contains("row 3, column 'text'") && e.contains("wrong type"),
        "{e}"
    );
}

#[test]
fn null_and_nan_labels_name_the_row() {
    let dir = tempfile::tempdir().unwrap();
    let text = Arc::new(StringArray::from(vec!["a", "b", "c"])) as ArrayRef;
    let p = parquet(
        dir.path(),
        "n.parquet",
        &batch(vec![
            ("text", text.clone()),
            (
                "label",
                Arc::new(Float64Array::from(vec![Some(1.0), None, Some(0.0)])),
            ),
        ]),
    );
    let e = err(read_all(&p, &["text"], Some("label")));
    assert!(
        e.contains("n.parquet: row 2, column 'label': null label"),
        "{e}"
    );
    let p = parquet(
        dir.path(),
        "nan.parquet",
        &batch(vec![
            ("text", text),
            (
                "label",
                Arc::new(Float64Array::from(vec![1.0, 0.5, f64::NAN])),
            ),
        ]),
    );
    let e = err(read_all(&p, &["text"], Some("label")));
    assert!(
        e.contains("nan.parquet: row 3, column 'label': NaN label"),
        "{e}"
    );
    let c = dir.path().join("n.csv");
    std::fs::write(&c, "text,label\na,1\nb,\n").unwrap();
    let e = err(read_all(&c, &["text"], Some("label")));
    assert!(e.contains("n.csv: row 2, column 'label'"), "{e}");
}

#[test]
fn null_text_names_the_row() {
    let dir = tempfile::tempdir().unwrap();
    let p = parquet(
        dir.path(),
        "nt.parquet",
        &batch(vec![(
            "text",
            Arc::new(StringArray::from(vec![Some("a"), Some("b"), None])) as ArrayRef,
        )]),
    );
    let e = err(read_all(&p, &["text"], None));
    assert!(
        e.contains("nt.parquet: row 3, column 'text': null text"),
        "{e}"
    );
}

#[test]
fn non_utf8_text_names_row_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let bytes: Vec<&[u8]> = vec![b"fine", b"also fine", b"bad \xff\xfe bytes"];
    let p = parquet(
        dir.path(),
        "b.parquet",
        &batch(vec![(
            "text",
            Arc::new(BinaryArray::from(bytes)) as ArrayRef,
        )]),
    );
    let e = err(read_all(&p, &["text"], None));
    assert!(
        e.contains("b.parquet: row 3, column 'text': not valid UTF-8"),
        "{e}"
    );
    let c = dir.path().join("b.csv");
    std::fs::write(&c, b"id,text\n1,ok\n2,caf\xe9\n").unwrap();
    let e = err(read_all(&c, &["text"], None));
    assert!(
        e.contains("b.csv: row 2, column 'text': not valid UTF-8"),
        "{e}"
    );
    let j = dir.path().join("b.jsonl");
    std::fs::write(&j, b"{\"text\": \"ok\"}\n{\"text\": \"caf\xe9\"}\n").unwrap();
    let e = err(read_all(&j, &["text"], None));
    assert!(
        e.contains("b.jsonl: row 2") && e.contains("not valid UTF-8"),
        "{e}"
    );
}

#[test]
fn truncated_and_corrupt_parquet() {
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read(common::data("stsb/dev.parquet")).unwrap();
    let t = dir.path().join("trunc.parquet");
    std::fs::write(&t, &good[..good.len() / 2]).unwrap();
    let e = err(read_all(&t, &["sentence1"], None));
    assert!(
        e.contains("trunc.parquet") && e.contains("corrupt or truncated"),
        "{e}"
    );
    // intact footer, garbage pages: the error surfaces while reading, still naming the file
    let mut bad = good.clone();
    for b in &mut bad[8..good.len() / 2] {
        *b = 0x5a;
    }
    let c = dir.path().join("corrupt.parquet");
    std::fs::write(&c, &bad).unwrap();
    let e = err(read_all(&c, &["sentence1", "sentence2"], Some("label")));
    assert!(e.contains("corrupt.parquet"), "{e}");
    let z = dir.path().join("zero.parquet");
    std::fs::write(&z, b"").unwrap();
    assert!(err(read_all(&z, &["text"], None)).contains("zero.parquet"));
}

#[test]
fn empty_datasets_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let empty = batch(vec![(
        "text",
        Arc::new(StringArray::from(Vec::<&str>::new())) as ArrayRef,
    )]);
    let p = parquet(dir.path(), "e.parquet", &empty);
    assert!(err(read_all(&p, &["text"], None)).contains("e.parquet: empty dataset"));
    for (f, body) in [("e.csv", "text\n"), ("e0.csv", ""), ("e.jsonl", "\n\n")] {
        let c = dir.path().join(f);
        std::fs::write(&c, body).unwrap();
        let e = err(read_all(&c, &["text"], None));
        assert!(e.contains(f) && e.contains("empty dataset"), "{e}");
    }
}

#[test]
fn csv_row_with_wrong_field_count() {
    let dir = tempfile::tempdir().unwrap();
    let c = dir.path().join("w.csv");
    std::fs::write(&c, "a,b\n1,2\n3\n").unwrap();
    let e = err(read_all(&c, &["a"], None));
    assert!(
        e.contains("w.csv: row 2: 1 fields, the header has 2"),
        "{e}"
    );
}

/// A failed or abandoned write leaves the previous output intact and no temporary file behind.
#[test]
fn parquet_output_is_atomic() {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("out.parquet");
    let v1 = batch(vec![(
        "text",
        Arc::new(StringArray::from(vec!["old"])) as ArrayRef,
    )]);
    write_parquet(&dest, v1.schema(), [&v1]).unwrap();
    let v2 = batch(vec![(
        "text",
        Arc::new(StringArray::from(vec!["new", "rows"])) as ArrayRef,
    )]);
    {
        let mut sink = ParquetSink::create(&dest, v2.schema()).unwrap();
        sink.write(&v2).unwrap();
        // dropped without finish(): as if the job died mid-write
    }
    assert_eq!(read_all(&dest, &["text"], None).unwrap().0[0], ["old"]);
    let mut sink = ParquetSink::create(&dest, v2.schema()).unwrap();
    let wrong = batch(vec![(
        "text",
        Arc::new(Int64Array::from(vec![1])) as ArrayRef,
    )]);
    assert!(sink.write(&wrong).is_err());
    drop(sink);
    assert_eq!(read_all(&dest, &["text"], None).unwrap().0[0], ["old"]);
    write_parquet(&dest, v2.schema(), [&v2]).unwrap();
    assert_eq!(
        read_all(&dest, &["text"], None).unwrap().0[0],
        ["new", "rows"]
    );
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["out.parquet"], "no temporary files left");
    let f = std::fs::read(&dest).unwrap();
    assert_eq!(&f[..4], b"PAR1");
    let md = parquet::file::reader::SerializedFileReader::new(std::fs::File::open(&dest).unwrap())
        .unwrap();
    use parquet::file::reader::FileReader;
    let codec = md.metadata().row_group(0).column(0).compression();
    assert!(
        matches!(codec, parquet::basic::Compression::ZSTD(_)),
        "{codec:?}"
    );
}

/// A pre-training corpus's texts from a list of columns: a pair file gives each column it has
/// (STSb train: both sentences of every row), a text file its one; a file with none of them is
/// refused naming the columns it has.
#[test]
fn corpus_texts_from_a_column_list() {
    let stsb = common::data("stsb/train.parquet");
    let mut n = 0usize;
    let mut first = Vec::new();
    data::for_each_text_of(
        &stsb,
        "text,sentence1,sentence2",
        |t| {
            if first.is_empty() {
                first.push(t.to_string());
            }
            n += 1;
            Ok(true)
        },
        |_| {},
    )
    .unwrap();
    let one = data::read_texts(&stsb, "sentence1", None).unwrap();
    let two = data::read_texts(&stsb, "sentence2", None).unwrap();
    assert_eq!(n, one.len() + two.len());
    assert_eq!(first[0], one[0]);
    let wiki = common::data("wikitext2/valid.parquet");
    let mut w = 0usize;
    data::for_each_text_of(
        &wiki,
        "text,sentence1",
        |_| {
            Ok({
                w += 1;
                true
            })
        },
        |_| {},
    )
    .unwrap();
    assert_eq!(w, data::read_texts(&wiki, "text", None).unwrap().len());
    let e = err(data::for_each_text_of(
        &stsb,
        "body,title",
        |_| Ok(true),
        |_| {},
    ));
    assert!(
        e.contains("train.parquet") && e.contains("body or title") && e.contains("sentence1"),
        "{e}"
    );
}

/// `convert` types CSV and TSV columns as pandas' read_csv does: integers Int64, numbers Float64,
/// text stays text; --invert-label keeps the label's type (issue 56: a CSV label arrived as the
/// string "1" and inverted to "0.0"). Real data: RTE dev and STSb dev written out as CSV/TSV.
#[test]
fn convert_types_csv_numbers_and_keeps_the_label_type_through_invert() {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Float32Type, Float64Type, Int64Type};
    use arrow_schema::DataType;
    fn s(p: &Path) -> &str {
        p.to_str().unwrap()
    }
    let dir = tempfile::tempdir().unwrap();
    let read = |p: &Path| -> Vec<arrow_array::RecordBatch> {
        let f = std::fs::File::open(p).unwrap();
        parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(f)
            .unwrap()
            .build()
            .unwrap()
            .map(|b| b.unwrap())
            .collect()
    };
    let column =
        |bs: &[arrow_array::RecordBatch], c: &str| -> (DataType, Vec<arrow_array::ArrayRef>) {
            let t = bs[0]
                .schema()
                .field_with_name(c)
                .unwrap()
                .data_type()
                .clone();
            (
                t,
                bs.iter()
                    .map(|b| b.column_by_name(c).unwrap().clone())
                    .collect(),
            )
        };
    // the parquet files as delimited text, through the csv crate
    let write_text = |src: &Path, dst: &Path, delim: u8, cols: &[&str]| {
        let bs = read(src);
        let mut w = csv::WriterBuilder::new()
            .delimiter(delim)
            .from_path(dst)
            .unwrap();
        w.write_record(cols).unwrap();
        for b in &bs {
            for r in 0..b.num_rows() {
                let cells: Vec<String> = cols
                    .iter()
                    .map(|c| {
                        arrow_cast::display::array_value_to_string(b.column_by_name(c).unwrap(), r)
                            .unwrap()
                    })
                    .collect();
                w.write_record(&cells).unwrap();
            }
        }
        w.flush().unwrap();
    };
    let rte = common::data("rte/dev.parquet");
    let rte_csv = dir.path().join("rte.csv");
    write_text(&rte, &rte_csv, b',', &["sentence1", "sentence2", "label"]);
    let (plain, flipped) = (dir.path().join("a.parquet"), dir.path().join("b.parquet"));
    common::ok(common::condenser(&["convert", s(&rte_csv), s(&plain)]));
    common::ok(common::condenser(&[
        "convert",
        s(&rte_csv),
        s(&flipped),
        "--invert-label",
        "label",
    ]));
    let ints = |p: &Path| -> Vec<i64> {
        let (t, cols) = column(&read(p), "label");
        assert_eq!(t, DataType::Int64, "{}", p.display());
        cols.iter()
            .flat_map(|c| c.as_primitive::<Int64Type>().values().to_vec())
            .collect()
    };
    let (orig, a, b) = (ints(&rte), ints(&plain), ints(&flipped));
    assert_eq!(orig, a, "the CSV's labels as the source's integers");
    assert!(a.iter().zip(&b).all(|(x, y)| x + y == 1) && a.len() == 277);
    let (t, _) = column(&read(&plain), "sentence1");
    assert_eq!(t, DataType::Utf8);

    // ids with leading zeros stay text (as numbers "007" would become 7), small numbers do not
    let ids = dir.path().join("ids.csv");
    std::fs::write(&ids, "id,score,label\n007,0.5,0\n010,-0.25,1\n3,0,1\n").unwrap();
    let ids_out = dir.path().join("ids.parquet");
    common::ok(common::condenser(&["convert", s(&ids), s(&ids_out)]));
    let got = read(&ids_out);
    assert_eq!(column(&got, "id").0, DataType::Utf8);
    assert_eq!(column(&got, "score").0, DataType::Float64);
    assert_eq!(column(&got, "label").0, DataType::Int64);
    let id0 = column(&got, "id").1[0].clone();
    assert_eq!(id0.as_string::<i32>().value(0), "007");

    // STSb as TSV: score 0-5 with decimals is Float64, the same values
    let stsb = common::data("stsb/dev.parquet");
    let tsv = dir.path().join("stsb.tsv");
    write_text(&stsb, &tsv, b'\t', &["sentence1", "sentence2", "score"]);
    let out = dir.path().join("stsb.parquet");
    common::ok(common::condenser(&["convert", s(&tsv), s(&out)]));
    // (the source stores f32; its shortest decimal form read back as f64 rounds to the same f32)
    let (t, cols) = column(&read(&stsb), "score");
    assert_eq!(t, DataType::Float32);
    let src: Vec<f32> = cols
        .iter()
        .flat_map(|c| c.as_primitive::<Float32Type>().values().to_vec())
        .collect();
    let (t, cols) = column(&read(&out), "score");
    assert_eq!(
        t,
        DataType::Float64,
        "a CSV number arrives as a float column"
    );
    let got: Vec<f32> = cols
        .iter()
        .flat_map(|c| c.as_primitive::<Float64Type>().values().to_vec())
        .map(|v| v as f32)
        .collect();
    assert_eq!(src, got);
}

/// A pair file's target named `score` (sentence-transformers' STSb names it so, and its trainers
/// take `label` or else `score`) is read by the default columns as `label` would be; where the
/// file has both, `label` wins; where it has neither, the error names both; `|` in --columns
/// picks the first name the file has, and a name given twice is refused.
#[test]
fn a_score_column_stands_for_label() {
    use condenser::data::{ColumnSpec, PairColumns, Pairs};
    let dir = tempfile::tempdir().unwrap();
    let src = common::data("stsb/dev.parquet");
    let (texts, labels) = read_all(&src, &["sentence1", "sentence2"], Some("label")).unwrap();
    let (_, scores) = read_all(&src, &[], Some("score")).unwrap();
    assert!(
        labels.iter().zip(&scores).any(|(l, s)| l != s),
        "stsb's score is 0-5, label 0-1"
    );
    let s = |i: usize| Arc::new(StringArray::from(texts[i].clone())) as ArrayRef;
    let only_score = parquet(
        dir.path(),
        "score.parquet",
        &batch(vec![
            ("sentence1", s(0)),
            ("sentence2", s(1)),
            ("score", Arc::new(Float64Array::from(labels.clone()))),
        ]),
    );
    let p = Pairs::read(&only_score, &PairColumns::default()).unwrap();
    assert_eq!(
        (p.labels.clone(), p.label_column.as_str()),
        (labels.clone(), "score")
    );
    assert_eq!(p.sentence2, texts[1]);
    // the real file has both: label (0-1) is taken, not score (0-5)
    let p = Pairs::read(&src, &PairColumns::default()).unwrap();
    assert_eq!(
        (p.labels, p.label_column.as_str()),
        (labels.clone(), "label")
    );
    let neither = parquet(
        dir.path(),
        "neither.parquet",
        &batch(vec![("sentence1", s(0)), ("sentence2", s(1))]),
    );
    let e = err(Pairs::read(&neither, &PairColumns::default()));
    assert!(
        e.contains("neither.parquet")
            && e.contains("column 'label' or 'score'")
            && e.contains("sentence1, sentence2"),
        "{e}"
    );
    let spec: ColumnSpec = "sentence1,sentence2,gold|score|label".parse().unwrap();
    assert_eq!(spec.to_string(), "sentence1,sentence2,gold|score|label");
    assert_eq!(
        spec.resolve(&src).unwrap(),
        ["sentence1", "sentence2", "score"]
    );
    let spec: ColumnSpec = "sentence1,sentence2,gold|silver?".parse().unwrap();
    assert_eq!(spec.resolve(&src).unwrap(), ["sentence1", "sentence2"]);
    for bad in ["a,b,label|label", "label,b,c|label", "a,b,label|"] {
        assert!(bad.parse::<ColumnSpec>().is_err(), "{bad}");
    }
}
