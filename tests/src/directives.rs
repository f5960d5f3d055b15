//! The expectation comments of corpus files (see tests/cases/README.md).

use dlc_language::types::DType;

#[derive(Debug, Clone)]
pub enum Expect {
    Out(String),
    Tensor { dtype: DType, shape: Vec<usize>, values: Vec<f64> },
}

#[derive(Debug, Clone)]
pub struct ExpectError {
    pub code: String,
    pub line: usize,
    pub col: usize,
    pub substring: Option<String>,
}

#[derive(Debug, Default)]
pub struct Directives {
    pub outputs: Vec<Expect>,
    pub errors: Vec<ExpectError>,
    pub tol: Option<f64>,
    pub check_only: bool,
}

pub fn parse(text: &str) -> Result<Directives, String> {
    let mut d = Directives::default();
    for (i, line) in text.lines().enumerate() {
        let l = line.trim();
        let at = |m: String| format!("line {}: {m}", i + 1);
        if let Some(rest) = l.strip_prefix("# expect-more:") {
            // Continues the previous expect-out on a new line (multi-line tensor output).
            match d.outputs.last_mut() {
                Some(Expect::Out(s)) => {
                    s.push('\n');
                    s.push_str(rest.strip_prefix(' ').unwrap_or(rest));
                }
                _ => return Err(at("expect-more without an expect-out before it".into())),
            }
        } else if let Some(rest) = l.strip_prefix("# expect-out:") {
            d.outputs.push(Expect::Out(rest.strip_prefix(' ').unwrap_or(rest).to_string()));
        } else if let Some(rest) = l.strip_prefix("# expect-tensor:") {
            d.outputs.push(parse_tensor(rest.trim()).map_err(at)?);
        } else if let Some(rest) = l.strip_prefix("# tol:") {
            d.tol = Some(rest.trim().parse().map_err(|_| at(format!("bad tolerance `{}`", rest.trim())))?);
        } else if let Some(rest) = l.strip_prefix("# expect-error:") {
            let mut parts = rest.trim().splitn(3, ' ');
            let code = parts.next().unwrap_or("").to_string();
            let pos = parts.next().unwrap_or("");
            let (line_s, col_s) = pos.split_once(':').ok_or_else(|| at(format!("bad position `{pos}`")))?;
            let substring = parts.next().map(|s| s.trim().to_string()).filter(|s| !s.is_empty());
            d.errors.push(ExpectError {
                code,
                line: line_s.parse().map_err(|_| at("bad line".into()))?,
                col: col_s.parse().map_err(|_| at("bad column".into()))?,
                substring,
            });
        } else if l == "# check-only" {
            d.check_only = true;
        }
    }
    Ok(d)
}

fn parse_tensor(s: &str) -> Result<Expect, String> {
    let open = s.find('[').ok_or("expected dtype[dims]")?;
    let close = s.find(']').ok_or("expected dtype[dims]")?;
    let dtype = DType::from_name(s[..open].trim()).ok_or_else(|| format!("unknown dtype `{}`", &s[..open]))?;
    let dims = s[open + 1..close].trim();
    let shape: Vec<usize> = if dims.is_empty() {
        vec![]
    } else {
        dims.split(',').map(|x| x.trim().parse::<usize>().map_err(|_| format!("bad dim `{x}`"))).collect::<Result<_, _>>()?
    };
    let values: Vec<f64> = s[close + 1..]
        .split_whitespace()
        .map(|v| match v.to_lowercase().as_str() {
            "true" => Ok(1.0),
            "false" => Ok(0.0),
            "nan" => Ok(f64::NAN),
            "inf" => Ok(f64::INFINITY),
            "-inf" => Ok(f64::NEG_INFINITY),
            x => x.parse::<f64>().map_err(|_| format!("bad value `{v}`")),
        })
        .collect::<Result<_, _>>()?;
    let n: usize = shape.iter().product();
    if n != values.len() {
        return Err(format!("shape {shape:?} holds {n} values but {} are given", values.len()));
    }
    Ok(Expect::Tensor { dtype, shape, values })
}
